"""The command line: the command group, options and the error boundary shared by commands."""
