"""BABILong's tasks as a kind: RULER's measurement (greedy answers after exact-length prompts, batches continued
from a shared prefix, resumable) with BABILong's stories in the context and its score of the answer."""

from __future__ import annotations

from extrapolate.core.errors import UserError
from extrapolate.tasks.babilong.generator import BabilongBuilder
from extrapolate.tasks.babilong.task import load_babilong_task
from extrapolate.tasks.kinds import register
from extrapolate.tasks.ruler.kind import RulerKind


class BabilongKind(RulerKind):
    """Every BABILong task file (`kind = "babilong"`): the mean score of greedy answers at a length."""

    name = "babilong"

    def load_file(self, data: dict, path):
        return load_babilong_task(data, path)

    def prompt_builder(self, task, tokenizer, bos, chat, heldout):
        return BabilongBuilder(task, tokenizer, bos, chat, heldout)

    def check_lengths(self, prompts: BabilongBuilder, lengths: tuple[int, ...]) -> None:
        """Every prompt built now: stories differ in length, so a length may hold one sample's and not the next
        one's, which would stop a run after its training."""
        self.check_fixed_part(prompts, lengths)
        samples = prompts.task.samples
        for length in sorted(set(lengths)):
            failed = [index for index in range(samples) if not prompts.fits(length, index)]
            if failed:
                raise UserError(
                    f"{prompts.task.name}: {len(failed)} of {samples} samples' stories do not fit in {length} tokens "
                    f"(sample {failed[0]} first); leave that length out, give a longer one, or fewer facts (max_facts)"
                )

    def check_fixed_part(self, prompts: BabilongBuilder, lengths: tuple[int, ...]) -> None:
        """The template, examples and answer fit the shortest length: the least a prompt needs before its story."""
        try:
            super().check_fixed_part(prompts, lengths)
        except UserError as exc:
            raise UserError(f"{exc} (before its story, which needs more)") from None


BABILONG = register(BabilongKind())
