"""Constants the core and every suite share (one definition each)."""

from __future__ import annotations

import string

INVALID = "invalid"                 # a reply no rule could read: counted, never guessed
LETTERS = string.ascii_uppercase    # option labels, A for the first option
ABCD = LETTERS[:4]                  # the four-option question of the papers
