"""`rolebound card`: one page across the four suites (build.py runs or reuses them, render.py and
chart.py write the page, compare.py puts several cards side by side). What a suite's
`card_figures` hook returns is built with report/fmt.py's figure, rate, diff and chart."""
