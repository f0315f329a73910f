"""WebShop's generated catalogue and frozen goal panels (``python -m agentenvs.tasks.webshop.generate``)."""
