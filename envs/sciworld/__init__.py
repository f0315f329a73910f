"""ScienceWorld's 30 science tasks on the real Java engine (``scienceworld==1.2.3``); see docs/sciworld.md."""
