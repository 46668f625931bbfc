"""Each broker's load report: its usage sources, its bundles' traffic, when it is rewritten."""
