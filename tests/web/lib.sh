# Sourced by tests/web/*.sh: WEB (the web/ folder), and need_web_modules PKG,
# which exits 77 (CTest: skipped) without node or web/node_modules/PKG.
WEB=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../web" && pwd)
need_web_modules() {
  if ! command -v node >/dev/null; then
    echo "SKIPPED: node is not installed"
    exit 77
  fi
  if [ ! -d "$WEB/node_modules/$1" ]; then
    echo "SKIPPED: $WEB/node_modules is missing (scripts/setup.sh runs npm ci there)"
    exit 77
  fi
}
