#!/bin/sh
# Entrypoint of the data-plane image: runs the dataplane CLI with the JVM copy that carries the
# file capability cap_ipc_lock when the container may hold CAP_IPC_LOCK (it is in the bounding
# set, as when the pod adds IPC_LOCK), so that a non-root data plane can page-lock more than
# RLIMIT_MEMLOCK; otherwise with the plain JVM (exec of a binary whose file capabilities exceed
# the bounding set fails with EPERM). With no_new_privs (allowPrivilegeEscalation: false) file
# capabilities are not gained: the data plane then reports that page-locking failed and why.
set -eu
jar=/opt/tensorcast/tensorcast-dataplane.jar
bounding=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
if [ -n "$bounding" ] && [ $(( (0x$bounding >> 14) & 1 )) -eq 1 ]; then
  exec "$JAVA_HOME/bin/java-ipc-lock" -jar "$jar" "$@"
fi
exec java -jar "$jar" "$@"
