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
        from extrapolate.cli.quiet import silence_library_bars

        silence_library_bars()
    from extrapolate.cli.app import main as run_app

    run_app()
