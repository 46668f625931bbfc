# Sourced by scripts/_venv.sh: whether the project's install in a venv is current, without pip.
#
# $VENV/.emubroker-installs holds one line per install that the venv's package still reflects:
# "<sha256 of pyproject.toml> <extras, or -> <tree>". An install is current when the package's
# metadata is in the venv and a line has the same pyproject.toml and tree and at least the
# extras asked for (scripts/test installs dev,spark, which covers scripts/run's none or spark).
# Anything else (a first run, a changed pyproject.toml, another tree sharing the venv, a package
# uninstalled behind our back) installs again.

install_key() { # ROOT -> the pyproject.toml's hash
    sha256sum "$1/pyproject.toml" | cut -d' ' -f1
}

install_is_current() { # VENV ROOT EXTRAS -> status 0 when nothing needs installing
    local venv="$1" root="$2" extras="$3" key sha have tree wanted
    compgen -G "$venv/lib/python*/site-packages/emubroker-*.dist-info" >/dev/null || return 1
    [ -f "$venv/.emubroker-installs" ] || return 1
    key="$(install_key "$root")"
    while read -r sha have tree; do
        [ "$sha" = "$key" ] && [ "$tree" = "$root" ] || continue
        for wanted in ${extras//,/ }; do
            [[ ",$have," == *",$wanted,"* ]] || continue 2
        done
        return 0
    done <"$venv/.emubroker-installs"
    return 1
}

install_record() { # VENV ROOT EXTRAS: after an install; lines for another tree or pyproject go
    local venv="$1" root="$2" extras="$3" key sha have tree
    key="$(install_key "$root")"
    {
        if [ -f "$venv/.emubroker-installs" ]; then
            while read -r sha have tree; do
                if [ "$sha" = "$key" ] && [ "$tree" = "$root" ]; then
                    echo "$sha $have $tree"
                fi
            done <"$venv/.emubroker-installs"
        fi
        echo "$key ${extras:--} $root"
    } >"$venv/.emubroker-installs.new"
    mv "$venv/.emubroker-installs.new" "$venv/.emubroker-installs"
}
