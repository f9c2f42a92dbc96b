//! `rnfsd check-config FILE`: load and validate a configuration file, its
//! exports file and the export paths, without serving.

use std::path::Path;

use super::exports_file::SystemResolver;
use super::{resolve_exports, Config, ConfigError};

/// The report printed for a usable file: a summary line, one line per
/// export, then the warnings.
pub fn check(file: &Path) -> Result<String, ConfigError> {
    let mut c = Config::load(file)?;
    c.add_exports_file(&SystemResolver)?;
    c.validate()?;
    let exports = resolve_exports(&c.exports)?;
    let mut out = format!(
        "{}: ok: {} export(s), listen {}\n",
        file.display(),
        exports.len(),
        crate::comma_list(&c.server.listen)
    );
    // resolve_exports keeps the order of c.exports.
    for (e, from) in exports.iter().zip(&c.exports) {
        let why = e.not_mounted.as_ref();
        let left = why.map(|w| format!(": not exported now: {w} (mountpoint)"));
        let left = left.unwrap_or_default();
        match &from.origin {
            Some(o) => out.push_str(&format!(
                "  {} (id {}, {o}){left}\n",
                e.path.display(),
                e.id
            )),
            None => out.push_str(&format!("  {} (id {}){left}\n", e.path.display(), e.id)),
        }
    }
    for w in &c.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    Ok(out)
}
