# bash completion for ramforge(1): subcommands, each subcommand's options,
# the values of enum options and files for paths. Installed as
# completions/ramforge in bash-completion's completionsdir (loaded on first
# use); it also works sourced on its own (it needs only compgen).
# Kept in step with each command's --help by tests/doc/test_completion.sh.

_ramforge_opts_run="-m --model -p --prompt -f --file -n --n-predict -t --threads -c --ctx-size
    -s --seed --residency-policy --memory-target --safety-reserve --release-mode
    --access-probe --sample-smaps --admission --dead-file-pages --verify-session
    --residency-page-budget --staging-budget --stream-window --no-stream-sequential
    --no-stream-hugepage --stream-prefetch-layers --no-stream-prefetch --stream-read-ahead
    --stream-spin-wait
    --observe-dispatch --dispatch-events
    --dispatch-sample-pages --residency-report --residency-report-json --metrics-file
    --residency-svg --profile --profile-history --no-repack --mlock --hold -v --verbose -h --help
    -q --quiet --memory-limit"
_ramforge_opts_inspect="-m --model -J --json -b --bytes --no-probe --no-repack --page-cache
    --residency-page-budget --residency-svg -c --ctx-size --memory-limit --admission
    -o --output -n --noheadings --by-layer -v --verbose -h --help"
_ramforge_opts_mkmodel="-o --output --force -P --preset -T --type -s --seed --route-skew
    --vocab -q --quiet -v --verbose -h --help"
_ramforge_opts_bench="-m --model -o --output -p --prompt -n --n-predict -t --threads
    -r --repetitions --policies --policy-args --run-args --conditions --copy-dir
    --keep-copy --metrics-file --memory-limit -q --quiet -h --help"
_ramforge_opts_serve="-m --model --host --port -c --ctx-size -n --n-predict -t --threads
    --residency-policy --memory-target --safety-reserve --release-mode --idle-seconds
    --staging-budget --queue --history --api-key --timeout --residency-report-json
    --profile --profile-history --profile-save-every -v --verbose -h --help
    --header-timeout --max-connections --max-connections-per-address -q --quiet --memory-limit
    --alias --seed --cors-origins --slots --no-slots --temp --sleep-idle-seconds
    --tags --chat-template --metrics --batch-size --prompt-cache
    --jinja --no-jinja
    --backend-sampling"
_ramforge_opts_watch="-a --all -i --interval -n --iterations --once -j --json -b --bytes
    --metrics-file --listen --release-idle --memory-target --release-mode --budget --keep
    --cgroup -h --help"
_ramforge_opts_exec="--residency-policy --memory-target --safety-reserve --release-mode
    --admission -c --ctx-size --idle-seconds --staging-budget --history --budget-quiet-ms
    --residency-report-json --metrics-file --metrics-listen --keep-cache-ram --memory-limit -v
    --verbose -h --help"
_ramforge_columns="INDEX NAME LAYER TYPE TENSORS RANGE PAGES SIZE RES NONRES UNKNOWN RES_BYTES
    PERCENT SAMPLED FILE"
_ramforge_policies="off observe conservative memory-bound reuse-aware active streaming"

# Completes a comma-separated LIST: the words after the last comma of $1.
_ramforge_list()
{
    local cur=$1 values=$2 head=
    [[ $cur == *,* ]] && head=${cur%,*},
    COMPREPLY=($(compgen -P "$head" -W "$values" -- "${cur##*,}"))
    compopt -o nospace 2>/dev/null
}

_ramforge_files()
{
    COMPREPLY=($(compgen -f -- "$1"))
    compopt -o filenames 2>/dev/null
}

_ramforge_dirs()
{
    COMPREPLY=($(compgen -d -- "$1"))
    compopt -o filenames 2>/dev/null
}

# Completes the value of option $2 of subcommand $1 (current text $3).
# Returns 1 when $2 takes no value.
_ramforge_value()
{
    local cmd=$1 opt=$2 cur=$3
    [[ $cmd == inspect && $opt == -n ]] && return 1 # inspect's -n is --noheadings
    case $opt in
    --residency-policy) COMPREPLY=($(compgen -W "$_ramforge_policies" -- "$cur")) ;;
    --release-mode)
        case $cmd in
        watch) COMPREPLY=($(compgen -W "cold pageout" -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "dontneed pageout" -- "$cur")) ;;
        esac ;;
    --admission) COMPREPLY=($(compgen -W "enforce warn off" -- "$cur")) ;;
    --dead-file-pages) COMPREPLY=($(compgen -W "release keep" -- "$cur")) ;;
    -T | --type) COMPREPLY=($(compgen -W "f32 f16 q8_0 q4_0" -- "$cur")) ;;
    -P | --preset) COMPREPLY=($(compgen -W "tiny small tinyllama qwen3moe-small qwen3moe-a3b qwen2moe-small" -- "$cur")) ;;
    --conditions) _ramforge_list "$cur" "warm isolated-nonresident" ;;
    --policies) _ramforge_list "$cur" "$_ramforge_policies" ;;
    -m | --model | -f | --file | --vocab | --residency-report-json | --metrics-file | --residency-svg | --profile)
        _ramforge_files "$cur" ;;
    -o | --output)
        case $cmd in
        bench) _ramforge_dirs "$cur" ;;
        inspect) _ramforge_list "$cur" "$_ramforge_columns" ;;
        *) _ramforge_files "$cur" ;;
        esac ;;
    --copy-dir | --cgroup) _ramforge_dirs "$cur" ;;
    -p | --prompt | -n | --n-predict | -t | --threads | -c | --ctx-size | -s | --seed | \
        --route-skew | --memory-target | --safety-reserve | --residency-page-budget | --staging-budget | \
        --stream-window | --stream-read-ahead | \
        --dispatch-events | --dispatch-sample-pages | -r | --repetitions | --policy-args | \
        --run-args | --host | --port | --idle-seconds | --queue | --history | --api-key | \
        --budget-quiet-ms | \
        --timeout | --memory-limit | --profile-history | --profile-save-every | \
        --header-timeout | --max-connections | --max-connections-per-address | \
        -i | --interval | --iterations | --listen | --release-idle | --budget | --keep | \
        --alias | --cors-origins | --temp | --sleep-idle-seconds | --tags | --batch-size | \
        --chat-template)
        COMPREPLY=() ;; # a number, size or text: nothing to offer
    *) return 1 ;;
    esac
    return 0
}

_ramforge()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev= cmd= i
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        run | inspect | mkmodel | bench | serve | watch | exec) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-h --help -V --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "run inspect mkmodel bench serve watch exec" -- "$cur"))
        fi
        return 0
    fi

    # --option=value: one word, or three when "=" is in COMP_WORDBREAKS
    # (bash's default): "--option" "=" "value".
    if [[ $cur == = ]] && ((COMP_CWORD - 1 > i)); then
        _ramforge_value "$cmd" "$prev" "" || COMPREPLY=()
        return 0
    fi
    if [[ $prev == = ]] && ((COMP_CWORD - 2 > i)); then
        _ramforge_value "$cmd" "${COMP_WORDS[COMP_CWORD - 2]}" "$cur" || COMPREPLY=()
        return 0
    fi
    if [[ $cur == --*=* ]]; then
        _ramforge_value "$cmd" "${cur%%=*}" "${cur#*=}" || COMPREPLY=()
        return 0
    fi
    ((COMP_CWORD - 1 > i)) && _ramforge_value "$cmd" "$prev" "$cur" && return 0

    if [[ $cur == -* ]]; then
        local opts=_ramforge_opts_$cmd
        COMPREPLY=($(compgen -W "${!opts}" -- "$cur"))
    elif [[ $cmd == inspect ]]; then
        _ramforge_files "$cur"
    fi
    return 0
}
complete -F _ramforge ramforge
