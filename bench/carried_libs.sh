# Sourced by the scripts that run libraries carried to the GPU machine beside the checkout (compare_builds.sh,
# config_ab.sh): `carried_setup REPO` puts cffi (the carried .whl/ wheels, where the machine lacks it) and the
# checkout's pyconv/ on PYTHONPATH; `carried_lib PATH DEST` unpacks a library (.so, .so.gz or .so.xz) to DEST.
carried_setup() {
    local repo="$1" site
    if ! python3 -c 'import cffi' 2> /dev/null && ls "$repo"/.whl/*.whl > /dev/null 2>&1; then  # shared/device/README.md
        site="$(mktemp -d)"
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$repo"/.whl/*.whl || return 1
        export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    fi
    export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
}

carried_lib() {
    case "$1" in
        *.gz) gunzip -c "$1" > "$2" ;;
        *.xz) python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
                  "$1" "$2" ;;
        *) cp "$1" "$2" ;;
    esac
}
