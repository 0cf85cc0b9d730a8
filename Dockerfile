# The image of every crawlproj service in docker-compose.yml: the workers, the
# ranker, `scrapy seed` and Scrapyd. The build context is the repository root,
# less what .dockerignore leaves out (virtualenvs, git, caches, crawl data).
FROM python:3.11-slim

# Scrapyd first: a change to the project's code rebuilds only the layers below.
RUN pip install --no-cache-dir "scrapyd>=1.6,<1.7"

WORKDIR /app
COPY pyproject.toml README.md scrapy.cfg ./
COPY crawlproj ./crawlproj
COPY middlewares ./middlewares
COPY settings ./settings
RUN pip install --no-cache-dir .

# Scrapyd's configuration: where it keeps eggs, logs and its queue, and the
# project it lists (docs/deploy.md, "docker compose").
COPY docker/scrapyd.conf /etc/scrapyd/scrapyd.conf
