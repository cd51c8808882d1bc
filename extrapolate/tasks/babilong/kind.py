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
        for length in sorted(set(lengths)):
            for index in range(prompts.task.samples):
                try:
                    prompts.prompt(length, index)
                except UserError as exc:
                    raise UserError(
                        f"{exc} (at {length}, sample {index}: its story is too long for the length); leave that "
                        "length out, give a longer one, or fewer facts (max_facts)"
                    ) from None


BABILONG = register(BabilongKind())
