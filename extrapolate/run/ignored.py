"""The options a job takes without using them, one warning sentence each (`ignored_options`): a run takes
them without complaint, so a warning says they changed nothing."""

from __future__ import annotations

from extrapolate.core.errors import UserError
from extrapolate.encodings import build_encoding, get_spec
from extrapolate.encodings.frequencies import SCALINGS
from extrapolate.kernels.attention import KERNELS, kernel_for
from extrapolate.run.checkpoint import is_pretrained
from extrapolate.run.request import RunRequest
from extrapolate.tasks.kinds import TASK_KINDS, is_retrieval, options_read


def ignored_options(request: RunRequest, encodings: list[str]) -> list[str]:
    """The options given a value they cannot use in this job, one sentence each: a run takes them without
    complaint, so a warning says they changed nothing. (Compared with the defaults: an option given its
    default value is indistinguishable from one not given, and changes nothing either way.)"""
    defaults, notes = RunRequest(), []

    def changed(*names: str) -> list[str]:
        return [f"--{n.replace('_', '-')}" for n in names if getattr(request, n) != getattr(defaults, n)]

    specs = [get_spec(e) for e in encodings]
    scaled = [s.name for s in specs if s.name in SCALINGS and SCALINGS[s.name].reads_factor]  # what reads s
    if request.factor is not None and not scaled and not request.extended:
        notes.append(
            "--factor scales the RoPE scalings (pi, ntk, yarn, …) and sets a fine-tune's L', and "
            f"{', '.join(encodings)} {'reads' if len(specs) == 1 else 'read'} no factor: ignored"
        )
    read = options_read(request.tasks)  # what the asked kinds read (LongPPL scores perplexity's documents)
    setters: dict[str, list[str]] = {}  # an option given for evaluations not asked -> those evaluations
    for name, kind in TASK_KINDS:
        if name in request.tasks:
            notes += kind.unused_options(request, defaults)
            continue
        for option in changed(*(option for option in kind.request_options if option not in read)):
            setters.setdefault(option, []).append(name)
    by_kinds: dict[tuple[str, ...], list[str]] = {}  # options that set the same evaluations: one sentence
    for option, kinds in setters.items():
        by_kinds.setdefault(tuple(kinds), []).append(option)
    for kinds, options in by_kinds.items():
        evaluations = f"the {' and '.join(kinds)} evaluation{'s' * (len(kinds) > 1)}"
        notes.append(f"{', '.join(options)} set {evaluations}, which --tasks does not include: ignored")
    if request.passkey_task is not None and request.train_tasks and not measures_retrieval(request.tasks):
        notes.append(
            "--passkey-task names the retrieval task measured (and trained on without --train-tasks); --tasks "
            "measures none and --train-tasks make the training rows: ignored"
        )
    if request.finetune_steps == 0 and request.finetune_lr != defaults.finetune_lr:
        notes.append("--finetune-lr sets a fine-tune's learning rate, and --finetune-steps asks for none: ignored")
    given = changed("longce_short", "longce_window", "longce_max_weight")
    if request.finetune_loss != "longce" and given:
        notes.append(f"{', '.join(given)} set LongCE's weights, and --finetune-loss is not longce: ignored")
    if request.finetune_adapter == "none" and request.lora_rank != defaults.lora_rank:
        notes.append(
            "--lora-rank sets the rank of a fine-tune's adapters, and --finetune-adapter asks for none: ignored"
        )
    swapped = substituted_kernels(request.kernel, encodings)
    if swapped:
        notes.append(
            f"--kernel {request.kernel} cannot run "
            + ", ".join(f"{e} (it runs {k})" for e, k in swapped.items())
            + "; the kernel column records what ran"
        )
    if is_pretrained(request.model):
        # a fine-tune of a pretrained model runs the papers' recipe (batch 1, lr 2e-5 unless --finetune-lr)
        given = changed(
            "steps",
            "batch_size",
            "batch_tokens",
            "curriculum",
            "lr",
            "tokenizer",
            "passkey_fraction",
            "train_tasks",
            "learned_policy",
            *(() if request.extended else ("train_dtype", "compile")),
        )
        if given:
            notes.append(
                f"{', '.join(given)} configure a model trained here; the pretrained model "
                f"{request.model} brings its own weights and tokenizer: ignored"
            )
    else:
        if request.trust_remote_code:
            notes.append(
                f"--trust-remote-code lets a checkpoint's own code run, and {request.model} is a model trained "
                "here: ignored"
            )
        given = changed("learned_policy", "position_std", "position_lr_scale")
        if given and "learned" not in [s.base_encoding for s in specs]:
            notes.append(f"{', '.join(given)} concern the learned encoding, which is not asked for: ignored")
    return notes


def measures_retrieval(tasks) -> bool:
    """Whether --tasks names a retrieval: `retrieval`, a kind that reads task files, or a task file."""
    from extrapolate.run.resolution import is_task_file  # the resolution imports this module's neighbours

    return any(is_retrieval(t) or is_task_file(t) for t in tasks)


def substituted_kernels(requested: str, encodings: list[str]) -> dict[str, str]:
    """{encoding: the kernel family it runs instead} for the encodings a requested kernel cannot serve (a bias
    cannot enter the fused causal call, Self-Extend and ReRoPE have their own kernels). Which family serves an
    encoding does not depend on the model's shape, so a small one stands in for it."""
    if requested == "auto" or requested not in KERNELS:  # an unknown name is refused by `check`
        return {}
    swapped = {}
    for name in encodings:
        scaled = 1.0 if get_spec(name).trains_own_model else 2.0
        try:
            encoding = build_encoding(name, d_model=64, n_heads=4, head_dim=16, max_len=64, factor=scaled)
        except UserError:  # the shape checks refuse this stand-in shape: the model's own shape is checked later
            continue
        family = kernel_for(encoding, requested).name
        if family != requested:
            swapped[name] = family
    return swapped
