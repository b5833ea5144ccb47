# sparkmirror in one image: `sparkmirror replicate` (PySpark in local[*]) and `sparkmirror monitor`.
#
#   docker build -t sparkmirror .
#   docker run --rm -v $PWD/mm2.properties:/etc/sparkmirror/mm2.properties:ro sparkmirror \
#       replicate /etc/sparkmirror/mm2.properties --checkpoint-dir /var/lib/sparkmirror/checkpoints
#
# Spark needs a Java runtime; the pinned spark-sql-kafka-0-10 connector jars are fetched
# from Maven Central at build time (sparkmirror/artifacts.py) into the image's cache.
FROM python:3.12-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SPARKMIRROR_CACHE=/opt/sparkmirror/cache

# procps: Spark's launcher scripts call ps; maven: fetches the connector jars once.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps maven \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/sparkmirror/src
COPY pyproject.toml README.md ./
COPY replicator ./replicator
COPY monitor ./monitor
COPY sparkmirror ./sparkmirror
COPY sparkmirror_cli ./sparkmirror_cli
RUN pip install --no-cache-dir . \
 && python -c "from sparkmirror import artifacts as a; a.ensure(a.SPARK_KAFKA)" \
 && rm -rf /root/.m2
# The driver JVM's class-data archive (replicator/datapath/cds.py): Spark starts ~3 s faster.
# Only speed depends on it, so an image without it still builds (and says so).
RUN python -m replicator.datapath.cds || echo "no class-data archive: Spark starts without it"

RUN useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/sparkmirror sparkmirror \
 && mkdir -p /var/lib/sparkmirror/checkpoints \
 && chown -R sparkmirror /var/lib/sparkmirror
USER sparkmirror
WORKDIR /var/lib/sparkmirror

# the monitor's default port inside the container is set by --listen in docker-compose.yml
EXPOSE 9464
ENTRYPOINT ["sparkmirror"]
CMD ["--help"]
