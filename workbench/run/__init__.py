"""The main job: every notebook headless (papermill), executed notebooks and an HTML report per run.

    runner   run the notebooks in name order into runs/notebooks/<UTC stamp>/ (summary.json, index.html)
    html     an executed notebook -> a standalone HTML page (plotly loaded from the run folder)

Behind `ascend-workbench run` and `make run`.
"""
