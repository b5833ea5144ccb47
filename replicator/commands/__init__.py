"""One module per sparkmirror subcommand; each exposes register(subparsers)."""
