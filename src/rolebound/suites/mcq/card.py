"""The mcq suite's section of `rolebound card`: none.

A card compares models on the same items, and mcq has no starter set: it runs only on a user's
--data file, so there is no common set to put on a card (the suite sets no on_card or card_limit).
"""

from __future__ import annotations


def card_figures(metrics) -> None:
    """None: mcq is not on the card (see the module docstring)."""
    return None
