# collapsewatch service image: the API, the scoring workers and the dashboard share it
# (docker-compose.yml runs each as its own container; docs/production.md).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 PIP_NO_CACHE_DIR=1 \
    COLLAPSEWATCH_DATA_DIR=/data
WORKDIR /app
# The CPU build of torch (sentence-transformers needs it; scoring runs on CPU).
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md alembic.ini ./
COPY collapsewatch ./collapsewatch
COPY dashboard ./dashboard
COPY migrations ./migrations
RUN pip install . \
    && useradd --system --uid 10001 --home-dir /data --create-home collapsewatch
# Nothing in the image needs root at run time.
USER collapsewatch
EXPOSE 8423 8424
CMD ["collapsewatch", "api", "--host", "0.0.0.0"]
