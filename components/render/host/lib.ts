// Bash functions every host script starts with. They implement the project's
// host rules once: files we write carry a marker, a file of someone else's
// that we replace is backed up first and restored on delete, and writes are
// atomic and skipped when the content is already right (probe, act, verify).

import { MANAGED_MARKER, STATE_DIR } from "../../../config/hostPaths";

export const HOST_LIB = String.raw`
SC_STATE=${STATE_DIR}
sc_log() { printf '[spark-cluster] %s\n' "$*"; }
sc_is_ours() { [ -f "$1" ] && head -n 3 "$1" | grep -qF '${MANAGED_MARKER}'; }
# sc_install_file PATH MODE < content: writes PATH if its content differs.
# A pre-existing file that is not ours is moved to $SC_STATE/backup first.
# Prints "changed PATH" or "unchanged PATH".
sc_install_file() {
  local path=$1 mode=$2 tmp
  tmp=$(mktemp "$(dirname "$path")/.spark-cluster.XXXXXX" 2>/dev/null || { mkdir -p "$(dirname "$path")"; mktemp "$(dirname "$path")/.spark-cluster.XXXXXX"; })
  cat > "$tmp"
  chmod "$mode" "$tmp"
  if [ -f "$path" ] && cmp -s "$tmp" "$path" && [ "$(stat -c %a "$path")" = "$mode" ]; then
    rm -f "$tmp"; echo "unchanged $path"; return 0
  fi
  if [ -e "$path" ] && ! sc_is_ours "$path" && [ ! -e "$SC_STATE/backup$path" ]; then
    mkdir -p "$SC_STATE/backup$(dirname "$path")"
    cp -a "$path" "$SC_STATE/backup$path"
    sc_log "backed up $path to $SC_STATE/backup$path"
  fi
  mv -f "$tmp" "$path"
  echo "changed $path"
}
# sc_remove_file PATH: removes our file and puts back the one we replaced, if any.
sc_remove_file() {
  local path=$1
  if [ -e "$SC_STATE/backup$path" ]; then
    mv -f "$SC_STATE/backup$path" "$path"
    sc_log "restored $path"
  elif sc_is_ours "$path"; then
    rm -f "$path"
    sc_log "removed $path"
  fi
}
# sc_cleanup_state: drops the state directory once nothing of ours is left in it.
sc_cleanup_state() {
  [ -d "$SC_STATE" ] && find "$SC_STATE" -depth -type d -empty -delete 2>/dev/null || true
}
# sc_wait SECONDS DESCRIPTION COMMAND...: retries COMMAND every second, bounded by SECONDS, and
# says what it waits for every 10 s (no silent wait in the pulumi up output).
sc_wait() {
  local limit=$1 what=$2 start now said
  shift 2
  start=$(date +%s); said=$start
  until "$@"; do
    now=$(date +%s)
    if [ $(( now - start )) -ge "$limit" ]; then
      sc_log "gave up after $limit s waiting for $what"; return 1
    fi
    if [ $(( now - said )) -ge 10 ]; then
      sc_log "waiting for $what ($(( now - start )) s of at most $limit s)"; said=$now
    fi
    sleep 1
  done
}
`;
