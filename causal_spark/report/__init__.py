"""The HTML report of a run: data (`data`), diagram geometry (`layout`), charts (`charts`),
rendering (`build`, templates under `templates/`)."""
