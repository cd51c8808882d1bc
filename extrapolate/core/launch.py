"""Whether this process was started by torchrun, and as which rank: read from the launcher's environment
alone, without torch, so the command line can ask before anything heavy is imported. The process group and
what runs across it are distributed.py."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def launched() -> bool:
    """Started by torchrun (or another launcher that sets the same environment) with more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def main_process() -> bool:
    """Rank 0 of a launch (or not launched at all): the process that prints and writes."""
    return int(os.environ.get("RANK", "0")) == 0


def run_then_leave(job: Callable[[], object]) -> None:
    """Run `job` (the CLI) in a launched process and end the process without interpreter teardown.

    DistributedDataParallel (torch 2.13) keeps a reference to the gloo group past `destroy_process_group`, so
    the group's worker threads outlive it. A worker still releasing the last collective's tensor while the
    interpreter finalises needs the GIL, cannot have it, and aborts the process ("terminate called without an
    active exception", SIGABRT) in about one launch in five on 2 cores. By the time `job` returns every file
    is written and closed, so flushing the standard streams and `os._exit` lose nothing."""
    code = 0
    try:
        job()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) or exc.code is None else 1
        if code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)  # what sys.exit("message") prints
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
