//! Compute and control cores: parsed, checked against the CPUs this process may use, and
//! defaulted (control = the lowest allowed core, compute = the rest) when delegating.

use coreplane_runtime::config::CpuMask;

pub struct Layout {
    pub compute: Option<String>,
    pub control: Option<String>,
}

fn allowed() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data filled by the kernel.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (0..libc::CPU_SETSIZE as usize).filter(|c| libc::CPU_ISSET(*c, &set)).collect()
    }
}

fn parse(option: &str, text: &str) -> Result<Vec<usize>, String> {
    let mask = CpuMask::parse(text.as_bytes()).ok_or_else(|| format!("{option}: '{text}' is not a CPU list"))?;
    let cpus: Vec<usize> = (0..coreplane_runtime::config::MAX_CPUS).filter(|c| mask.contains(*c)).collect();
    if cpus.is_empty() {
        return Err(format!("{option}: empty CPU list"));
    }
    Ok(cpus)
}

fn check_allowed(option: &str, cpus: &[usize], allowed: &[usize]) -> Result<(), String> {
    match cpus.iter().find(|c| !allowed.contains(c)) {
        Some(bad) => Err(format!("{option}: CPU {bad} does not exist or is not allowed here (allowed: {})", list(allowed))),
        None => Ok(()),
    }
}

pub fn list(cpus: &[usize]) -> String {
    cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// Validates and completes the layout.
pub fn layout(compute: Option<&str>, control: Option<&str>, delegating: bool) -> Result<Layout, String> {
    let allowed = allowed();
    let compute = compute.map(|t| parse("--compute-cores", t)).transpose()?;
    let control = control.map(|t| parse("--control-cores", t)).transpose()?;
    if let (Some(a), Some(b)) = (&compute, &control) {
        if let Some(c) = a.iter().find(|c| b.contains(c)) {
            return Err(format!("--compute-cores and --control-cores overlap on CPU {c}"));
        }
    }
    for (option, cpus) in [("--compute-cores", &compute), ("--control-cores", &control)] {
        if let Some(cpus) = cpus {
            check_allowed(option, cpus, &allowed)?;
        }
    }
    let control = match control {
        Some(c) => Some(c),
        None if delegating && allowed.len() > 1 => Some(vec![allowed[0]]),
        None => None,
    };
    let compute = compute.or_else(|| {
        control.as_ref().map(|ctl| allowed.iter().copied().filter(|c| !ctl.contains(c)).collect())
    });
    Ok(Layout { compute: compute.map(|c| list(&c)), control: control.map(|c| list(&c)) })
}

impl Layout {
    pub fn compute_list(&self) -> Vec<usize> {
        split(&self.compute)
    }
    pub fn control_list(&self) -> Vec<usize> {
        split(&self.control)
    }
}

fn split(s: &Option<String>) -> Vec<usize> {
    s.as_deref().map_or_else(Vec::new, |t| t.split(',').filter_map(|c| c.parse().ok()).collect())
}

/// Checks `KEY:CPULIST|...` (every CPU allowed here) and returns it unchanged.
pub fn check_placement(spec: &str) -> Result<&str, String> {
    let allowed = allowed();
    for entry in spec.split('|') {
        let (key, cpus) = entry.split_once(':').ok_or_else(|| format!("--placement: '{entry}' is not KEY:CPULIST"))?;
        if key.is_empty() || !key.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
            return Err(format!("--placement: '{key}' is not a clone-tree key such as 0 or 0.1"));
        }
        check_allowed(&format!("--placement {key}"), &parse("--placement", cpus)?, &allowed)?;
    }
    Ok(spec)
}
