"""Tools for trying imposer: the demo and sample artwork. Imported only by the CLI and tests."""
