"""`rolebound card`: one page across the four suites (build.py runs or reuses them, figures.py is
what a suite's `card_figures` hook returns, render.py and chart.py write the page, compare.py
puts several cards side by side)."""
