//! Delegation policies: which syscalls go to the control cores. The presets and the calls that
//! must always stay local come from the one presets file the models also read.

use crate::syscalls;
use coreplane_runtime::sysset::SysSet;
use serde::Deserialize;
use std::collections::BTreeMap;

const PRESETS_JSON: &str = include_str!("../../../src/coreplane/model/presets.json");

#[derive(Deserialize)]
struct Preset {
    local: Vec<String>,
}

#[derive(Deserialize)]
struct Presets {
    always_local: Vec<String>,
    presets: BTreeMap<String, Preset>,
}

fn presets() -> Presets {
    serde_json::from_str(PRESETS_JSON).expect("presets.json is valid (checked by tests)")
}

fn resolve(names: &[String], origin: &str) -> Result<Vec<usize>, String> {
    names
        .iter()
        .map(|n| syscalls::number(n.trim()).ok_or_else(|| format!("{origin}: unknown syscall '{}'", n.trim())))
        .collect()
}

/// Names listed in `@FILE`: one or more per line, separated by commas or spaces, `#` comments.
fn names_from_file(path: &str) -> Result<Vec<(usize, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--delegate @{path}: cannot read {path}: {e}"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for word in line.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()) {
            out.push((i + 1, word.to_string()));
        }
    }
    Ok(out)
}

/// The delegated set for `--delegate SPEC` minus `--local` names and the always-local calls.
pub fn delegated_set(spec: &str, local: &[String]) -> Result<SysSet, String> {
    let p = presets();
    let mut set = SysSet::EMPTY;
    let all = || {
        let mut s = SysSet::EMPTY;
        syscalls::SYSCALLS.iter().for_each(|(nr, _)| s.insert(*nr));
        s
    };
    match spec {
        "none" => {}
        "all" => set = all(),
        preset if p.presets.contains_key(preset) => {
            set = all();
            for nr in resolve(&p.presets[preset].local, &format!("preset {preset}"))? {
                set.remove(nr);
            }
        }
        file if file.starts_with('@') => {
            for (line, name) in names_from_file(&file[1..])? {
                let nr = syscalls::number(&name).ok_or_else(|| format!("{}:{line}: unknown syscall '{name}'", &file[1..]))?;
                set.insert(nr);
            }
        }
        list => {
            let names: Vec<String> = list.split(',').filter(|s| !s.trim().is_empty()).map(str::to_string).collect();
            if names.is_empty() {
                return Err(format!("--delegate: empty policy '{list}'"));
            }
            for nr in resolve(&names, "--delegate")? {
                set.insert(nr);
            }
        }
    }
    for nr in resolve(local, "--local")? {
        set.remove(nr);
    }
    for nr in resolve(&p.always_local, "presets.json always_local")? {
        set.remove(nr);
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_resolve_and_keep_identity_calls_local() {
        for name in presets().presets.keys() {
            let s = delegated_set(name, &[]).unwrap();
            assert!(!s.contains(syscalls::number("clone").unwrap()));
            assert!(!s.contains(syscalls::number("futex").unwrap()));
        }
        let all = delegated_set("all", &[]).unwrap();
        assert!(all.contains(0) && !all.contains(syscalls::number("exit_group").unwrap()));
        let mck = delegated_set("mckernel", &[]).unwrap();
        assert!(!mck.contains(syscalls::number("mmap").unwrap()) && mck.contains(syscalls::number("write").unwrap()));
    }

    #[test]
    fn lists_local_and_errors() {
        let s = delegated_set("read,write", &["write".into()]).unwrap();
        assert!(s.contains(0) && !s.contains(1));
        assert_eq!(delegated_set("read,bogus", &[]).unwrap_err(), "--delegate: unknown syscall 'bogus'");
        assert_eq!(delegated_set("none", &["nope".into()]).unwrap_err(), "--local: unknown syscall 'nope'");
        let dir = std::env::temp_dir().join(format!("cp-policy-{}", std::process::id()));
        std::fs::write(&dir, "read # comment\nwrite, fstat\nnotacall\n").unwrap();
        let err = delegated_set(&format!("@{}", dir.display()), &[]).unwrap_err();
        assert!(err.ends_with(":3: unknown syscall 'notacall'"), "{err}");
        std::fs::remove_file(&dir).unwrap();
        let err = delegated_set(&format!("@{}", dir.display()), &[]).unwrap_err();
        assert!(err.starts_with(&format!("--delegate @{0}: cannot read {0}: ", dir.display())), "{err}");
    }
}
