"""Spark's Hadoop settings as Spark's own readers and writers see them: the session's
(`spark.conf.set("fs.azure.account.key...", ...)`, as Databricks' and Azure's guides set them)
over the context's (`spark.hadoop.*`, core-site.xml). The store modules beside this one make
pyarrow filesystems of them, so tfspark's tasks reach a store as Spark's connectors do."""

from __future__ import annotations

from typing import Any


class HadoopConf:
    """Read-only view of one Hadoop Configuration on the JVM."""

    def __init__(self, jconf: Any) -> None:
        self._conf = jconf

    def get(self, *names: str, secret: bool = False, defaults: bool = True) -> str | None:
        """The first of `names` that is set (stripped), or None. A secret is looked up as
        Hadoop's connectors do: a credential provider's store first, then the plain setting.
        defaults=False leaves out what only Hadoop's core-default.xml sets (Hadoop 3.4's
        fs.gs.auth.type=COMPUTE_ENGINE, say): what the user chose."""
        for name in names:
            if not defaults and list(self._conf.getPropertySources(name) or []) == [
                    "core-default.xml"]:
                continue
            if secret:
                chars = self._conf.getPassword(name)
                value = "".join(chars) if chars is not None else None
            else:
                value = self._conf.get(name)
            if value is not None and str(value).strip():
                return str(value).strip()
        return None


def hadoop_conf(spark: Any) -> HadoopConf | None:
    """The Hadoop settings Spark's DataFrame readers use in `spark`'s session (its
    sessionState's newHadoopConf: the session's settings over the context's); the context's
    alone where that is out of reach, None under Spark Connect (no JVM in this process)."""
    jsc = getattr(spark, "_jsc", None)
    if jsc is None:
        return None
    try:
        return HadoopConf(spark._jsparkSession.sessionState().newHadoopConf())
    except Exception:  # noqa: BLE001 - a Spark without it: the context's settings still hold
        return HadoopConf(jsc.hadoopConfiguration())
