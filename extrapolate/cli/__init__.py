"""The command line: options parsed into the library's request (`options`), one call per command
(`app`), rendering and progress (`render`), one-line errors and exit codes (`util`). Nothing else imports it."""


def main() -> None:
    """The `extrapolate` command (the entry point installs name `extrapolate.cli:main`)."""
    import sys

    if sys.argv[1:] == ["--version"]:  # answered before the app (and torch) is imported: instant
        from importlib.metadata import version

        print(f"extrapolate {version('extrapolate')}")
        return
    if "--quiet" in sys.argv[1:]:  # before torch imports tqdm, which reads its switch then
        silence_library_bars()
    from extrapolate.cli.app import main as run_app

    run_app()


def silence_library_bars() -> None:
    """--quiet silences the libraries' own progress bars too: transformers' (reading a checkpoint's weights)
    and tqdm's (a GGUF file's tensors dequantized), in this process and in the workers it starts. Both read
    their switch from the environment when first imported; transformers is told directly if it already is."""
    import os
    import sys

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["TQDM_DISABLE"] = "1"
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
