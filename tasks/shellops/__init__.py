"""ShellOps task panels (``panels/``, ``snapshots/``) and the code that writes and verifies them."""
