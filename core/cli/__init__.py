"""The click command-line interface: the only place where cmpx errors become messages and exit codes."""
