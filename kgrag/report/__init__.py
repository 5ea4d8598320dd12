"""The visual report of a finished run: one self-contained ``report.html`` (``page``) of
the run folder's results (``run_folder``): metric bars, sweep curves and what each
graph build cost and made (``figures``, drawn with plotly, its JavaScript inlined once),
and every question with what each strategy retrieved and answered (``questions``)."""
