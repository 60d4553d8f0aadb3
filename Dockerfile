# Production image for Keepsake: web (gunicorn), worker and beat share it.

# Front-end libraries from npm (pinned in package-lock.json), as `make vendor` does.
FROM node:20-slim AS vendor
WORKDIR /vendor
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts \
    && mkdir -p static/vendor \
    && cp node_modules/cytoscape/dist/cytoscape.min.js static/vendor/cytoscape.min.js \
    && cp node_modules/cytoscape/LICENSE static/vendor/cytoscape.LICENSE

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    DEBUG=false \
    KEEPSAKE_STATIC_MANIFEST=true

RUN useradd --create-home --uid 1000 keepsake
WORKDIR /app

COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
COPY --from=vendor /vendor/static/vendor/ static/vendor/
# collectstatic needs a key but no database; so does exporting the embedding model
# to ONNX from the shipped weights (.models/, read by web and worker without torch).
RUN SECRET_KEY=build-only python manage.py collectstatic --no-input \
    && SECRET_KEY=build-only python manage.py export_embedding_model

# Named volumes take the ownership of the directory they are mounted on: make the
# backups and photos directories the app user's, or it could not write to them.
RUN mkdir -p /backups /media && chown keepsake:keepsake /backups /media

USER keepsake
EXPOSE 8000
CMD ["gunicorn", "config.wsgi:application", "--config", "python:config.gunicorn", "--bind", "0.0.0.0:8000", "--workers", "3"]
