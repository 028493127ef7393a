#!/bin/sh
# Test scaffolding (molecule/nvidia_driver/prepare.yml), not the role: the gcc-12 that the DKMS build calls.
# Every call goes to ccache (its settings: /etc/ccache.conf).
#
# NVIDIA's conftest.sh compiles a few hundred small tests, each as conftest<its PID>.c with
# -DKBUILD_BASENAME="#conftest<PID>", and keeps only whether each compiled. ccache hashes the file name and the
# flags, so with other PIDs than the last run's (make -j2 starts them in any order) a test missed the cache, and
# ccache never keeps a failed compile, two thirds of the tests. Here a test is compiled as a hard link named after
# its content, with a PID-free define; and a compile that fails leaves an object file that says so (ccache keeps
# it like any other), which this script turns back into the failure conftest.sh looks for.
marker="gpufabric conftest: did not compile"
if [ -n "${GPUFABRIC_CONFTEST_COMPILE-}" ]; then
    # ccache runs this in place of the compiler for a test: preprocessing, or the compile into -o's file.
    /usr/bin/gcc-12.real "$@" && exit 0
    status=$?
    object=
    for arg do
        case ${arg} in
            -E) exit "${status}" ;;
        esac
        [ "${object}" = next ] && object=${arg}
        [ "${arg}" = -o ] && object=next
    done
    case ${object} in
        "" | next) exit "${status}" ;;
    esac
    printf '%s\n' "${marker}" >"${object}"
    exit 0
fi
src=
for arg do
    case ${arg} in
        conftest[0-9]*.c) src=${arg} ;;
        -o | -E) exec /usr/bin/ccache /usr/bin/gcc-12.real "$@" ;;
    esac
done
stable=conftest-$(sha256sum <"${src:-/dev/null}" | cut -c1-32).c
# No test, or an identical test compiling at this moment under the same name: compile it as it is.
if [ -z "${src}" ] || ! ln "${src}" "${stable}" 2>/dev/null; then
    exec /usr/bin/ccache /usr/bin/gcc-12.real "$@"
fi
for arg do
    case ${arg} in
        "${src}") arg=${stable} ;;
        -DKBUILD_BASENAME=\"#conftest*) arg=-DKBUILD_BASENAME=\"#conftest\" ;;
        -DKBUILD_MODNAME=\"#conftest*) arg=-DKBUILD_MODNAME=\"#conftest\" ;;
    esac
    set -- "$@" "${arg}"
    shift
done
object=${src%.c}.o
# The compiler ccache hashes: gcc-12's driver and this script.
check="string:$(stat -L -c %s-%Y /usr/bin/gcc-12.real)-$(cksum <"$0")"
GPUFABRIC_CONFTEST_COMPILE=1 CCACHE_COMPILER="$0" CCACHE_COMPILERCHECK="${check}" \
    /usr/bin/ccache "$0" "$@" -o "${object}"
status=$?
rm -f "${stable}"
if [ "${status}" -eq 0 ] && [ "$(head -c ${#marker} "${object}" 2>/dev/null)" = "${marker}" ]; then
    rm -f "${object}"
    status=1
fi
exit "${status}"
