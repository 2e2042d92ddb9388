# collapsewatch service image: API, worker and (later) dashboard share it.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# The CPU build of torch (sentence-transformers needs it; scoring runs on CPU).
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md alembic.ini ./
COPY collapsewatch ./collapsewatch
COPY dashboard ./dashboard
COPY migrations ./migrations
RUN pip install .
EXPOSE 8423
CMD ["collapsewatch", "api", "--host", "0.0.0.0"]
