"""Constants the core and every suite share (one definition each)."""

from __future__ import annotations

import string

VERSION = "0.1.0"                   # pyproject.toml's; rolebound.__version__ (here so no module imports the root)
INVALID = "invalid"                 # a reply no rule could read: counted, never guessed
LETTERS = string.ascii_uppercase    # option labels, A for the first option
ABCD = LETTERS[:4]                  # the four-option question of the papers
