"""HTTP, once (DESIGN decision 21): what every surface of the one application shares.

- :mod:`.app` — the FastAPI application built from routers: security headers on every response,
  cheap JSON errors for what no route answers, no CDN-loaded docs;
- :mod:`.server` — uvicorn on one or several addresses, with the connection limits (headers deadline,
  keep-alive, concurrency; proxy headers ignored);
- :mod:`.bodies` — request bodies under a size cap, idle and total timeouts, and bounded inflation;
- :mod:`.limits` — a token bucket per key.

Which routers make up the application is :mod:`consumers.app.http`'s business.
"""
