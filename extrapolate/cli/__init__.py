"""The command line: options parsed into the library's request (`options`), one call per command
(`app`), rendering and progress (`render`), one-line errors and exit codes (`util`). Nothing else imports it."""
