"""How the notebooks show results: ipywidgets panels bound to pure render functions (`widgets`).

Below every domain, so a domain's notebook module can build its panels; it imports no domain.
"""
