# Shared by the benchmark scripts that run a main from the data plane's test classes
# (load-throughput.sh, source-sweep.sh). Source it after `cd` to the repository root:
#
#   . bench/lib.sh
#   dataplane_bench_setup NAME MAIN_CLASS [REQUIRED_FILE...]
#       checks java and /dev/shm; builds when sources are newer than the last build or a required
#       file (relative to dataplane/target, e.g. test-servers/s3mock-exec.jar) is missing
#   exec java ... -cp "$bench_cp" "$main_class" "$@"
#
# Sets: repo, target, s3mock_jar, bench_cp (test classes + classes + test-scope dependencies).

dataplane_bench_setup() {
  local name=$1 f missing=false
  main_class=$2
  shift 2
  repo=$(pwd)
  target="$repo/dataplane/target"
  s3mock_jar="$target/test-servers/s3mock-exec.jar"
  local cp_file="$target/bench.classpath"
  local class_file="$target/test-classes/${main_class//.//}.class"

  command -v java >/dev/null || { echo "$name: java is required" >&2; exit 2; }
  [ -d /dev/shm ] || { echo "$name: /dev/shm (tmpfs) is required for the store" >&2; exit 2; }

  for f in "$@"; do [ -f "$target/$f" ] || missing=true; done
  if $missing || [ ! -f "$class_file" ] || [ ! -f "$cp_file" ] \
    || [ -n "$(find "$repo/dataplane/src" "$repo/crds/src" "$repo/dataplane/pom.xml" \
                 "$repo/pom.xml" -newer "$cp_file" -print -quit)" ]; then
    command -v mvn >/dev/null || { echo "$name: mvn is required to build" >&2; exit 2; }
    echo "[bench] building dataplane test classes (mvn -pl dataplane -am test-compile)" >&2
    mvn -B -q -ntp -pl dataplane -am test-compile dependency:build-classpath \
      -Dmdep.includeScope=test -Dmdep.outputFile="$cp_file"
    touch "$cp_file"
  fi
  bench_cp="$target/test-classes:$target/classes:$(cat "$cp_file")"
}
