"""The lab: the studies behind the cards in `zoo/`, the engine that runs them, and the generators that turn
their committed result files into the cards' tables.

A study is a plan (`engine.Study`: its arms and their flags, the learning-rate grid and how it grows, the
seeds, the column that picks a rate, its result file) run by one engine, `keras-tse study NAME`; a card's
tables are rendered from result files by `generated_tables` (`keras-tse study NAME --card`). Everything here
reads and writes the checkout's `zoo/` and `recipes/`: the lab works in a clone, not in an installed wheel.
"""

import os

# The checkout this package sits in: recipes/lab/ -> the repository root.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
