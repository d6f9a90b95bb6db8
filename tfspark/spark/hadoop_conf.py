"""Spark's Hadoop settings as Spark's own readers and writers see them: the session's
(`spark.conf.set("fs.azure.account.key...", ...)`, as Databricks' and Azure's guides set them)
over the context's (`spark.hadoop.*`, core-site.xml), through Spark Connect too. The store
modules beside this one make pyarrow filesystems of them, so tfspark's tasks reach a store as
Spark's connectors do."""

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


class SessionConf:
    """The same view through Spark Connect, where no JVM is in this process: the session's
    settings (spark.conf.set) and the cluster's spark.hadoop.* ones, as the server's readers
    see them; core-site.xml and credential providers stay on the server."""

    def __init__(self, runtime_conf: Any) -> None:
        self._conf = runtime_conf

    def get(self, *names: str, secret: bool = False, defaults: bool = True) -> str | None:
        """The first of `names` set in the session (or as spark.hadoop.<name>), or None."""
        for name in names:
            for key in (name, f"spark.hadoop.{name}"):
                value = self._conf.get(key, None)
                if value is not None and str(value).strip():
                    return str(value).strip()
        return None


Settings = HadoopConf | SessionConf  # (what the store modules read)


def hadoop_conf(spark: Any) -> Settings | None:
    """The Hadoop settings Spark's DataFrame readers use in `spark`'s session (its
    sessionState's newHadoopConf: the session's settings over the context's); the context's
    alone where that is out of reach; under Spark Connect the session's (SessionConf), None
    without either."""
    jsc = getattr(spark, "_jsc", None)
    if jsc is None:
        conf = getattr(spark, "conf", None)
        return SessionConf(conf) if conf is not None else None
    try:
        return HadoopConf(spark._jsparkSession.sessionState().newHadoopConf())
    except Exception:  # noqa: BLE001 - a Spark without it: the context's settings still hold
        return HadoopConf(jsc.hadoopConfiguration())
