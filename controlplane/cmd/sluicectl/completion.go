package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// completionWords lists, for each command path ("" is the top), the words
// that may follow it: subcommands, or a leaf command's flags. The scripts are
// built from the command table, so they cannot miss a command or a flag.
func completionWords() map[string][]string {
	words := map[string][]string{}
	var walk func(prefix string, list []*command)
	walk = func(prefix string, list []*command) {
		for _, c := range list {
			words[prefix] = append(words[prefix], c.name)
			path := strings.TrimSpace(prefix + " " + c.name)
			if c.sub != nil {
				walk(path, c.sub)
				continue
			}
			fs := (&cli{}).flagSet(path, c)
			words[path] = []string{"--help"}
			fs.VisitAll(func(f *flag.Flag) {
				if len(f.Name) == 1 {
					words[path] = append(words[path], "-"+f.Name)
				} else {
					words[path] = append(words[path], "--"+f.Name)
				}
			})
		}
	}
	walk("", commands())
	return words
}

// wordsFunction is a shell function printing the words after a path, and
// failing for a path that is not a command.
func wordsFunction(w io.Writer, words map[string][]string) {
	paths := make([]string, 0, len(words))
	for p := range words {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	fmt.Fprintln(w, "_sluicectl_words() {\n  case \"$1\" in")
	for _, p := range paths {
		fmt.Fprintf(w, "    %q) echo %q ;;\n", p, strings.Join(words[p], " "))
	}
	fmt.Fprintln(w, "    *) return 1 ;;\n  esac\n}")
}

func cmdCompletion(c *cli, _ *flagSet, args []string) error {
	words := completionWords()
	switch args[0] {
	case "bash":
		fmt.Fprintln(c.stdout, "# bash completion for sluicectl: source <(sluicectl completion bash)")
		wordsFunction(c.stdout, words)
		fmt.Fprint(c.stdout, `_sluicectl() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" p="" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    if _sluicectl_words "${p:+$p }$w" >/dev/null; then p="${p:+$p }$w"; fi
  done
  local list
  list="$(_sluicectl_words "$p")"
  [[ $prev == -o ]] && list="table json yaml"
  [[ $p == completion ]] && list="bash zsh"
  COMPREPLY=($(compgen -W "$list" -- "$cur"))
}
complete -o default -F _sluicectl sluicectl
`)
	case "zsh":
		fmt.Fprintln(c.stdout, "#compdef sluicectl\n# zsh completion for sluicectl: source <(sluicectl completion zsh), or save it as _sluicectl in $fpath")
		wordsFunction(c.stdout, words)
		fmt.Fprint(c.stdout, `_sluicectl() {
  local p="" i w
  for ((i = 2; i < CURRENT; i++)); do
    w="${words[i]}"
    if _sluicectl_words "${p:+$p }$w" >/dev/null; then p="${p:+$p }$w"; fi
  done
  local -a list
  list=(${=$(_sluicectl_words "$p")})
  [[ ${words[CURRENT-1]} == -o ]] && list=(table json yaml)
  [[ $p == completion ]] && list=(bash zsh)
  compadd -a list
  _files
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then _sluicectl "$@"; else compdef _sluicectl sluicectl; fi
`)
	default:
		return fmt.Errorf("completion %q: must be bash or zsh", args[0])
	}
	return nil
}
