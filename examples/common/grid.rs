//! `reproduce --grid`: grid axes parsed from the command line, the points
//! they span, and dotted keys set in a config's table.

use hdgcn::Error;

/// One axis of a `--grid`: a (possibly dotted) key and its values, in
/// order of preference.
#[derive(Debug, Clone)]
pub(crate) struct GridAxis {
    pub(crate) key: String,
    pub(crate) values: Vec<toml::Value>,
}

/// Parses `KEY=V1,V2,..`; each value is read as a TOML value (a bare word
/// that is not one is taken as a string).
pub(crate) fn parse_grid_axis(text: &str) -> Result<GridAxis, String> {
    let (key, values) = text
        .split_once('=')
        .ok_or_else(|| format!("--grid {text:?}: expected KEY=V1,V2,.."))?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|k| k.trim().is_empty()) {
        return Err(format!("--grid {text:?}: empty key"));
    }
    let values = values
        .split(',')
        .map(|v| {
            let v = v.trim();
            if v.is_empty() {
                return Err(format!("--grid {text:?}: empty value"));
            }
            let doc: Result<toml::Table, _> = toml::from_str(&format!("v = {v}"));
            Ok(doc
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(v.to_owned())))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(GridAxis {
        key: key.to_owned(),
        values,
    })
}

/// Every point of the grid, in order of preference (the first axis
/// varies slowest).
pub(crate) fn grid_points(axes: &[GridAxis]) -> Vec<Vec<(String, toml::Value)>> {
    let mut points = vec![Vec::new()];
    for axis in axes {
        points = points
            .into_iter()
            .flat_map(|p: Vec<(String, toml::Value)>| {
                axis.values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((axis.key.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    points
}

/// `table` with the dotted `key` set to `value` (sub-tables made as needed).
pub(crate) fn set_dotted(
    table: &mut toml::Table,
    key: &str,
    value: toml::Value,
) -> hdgcn::Result<()> {
    let mut parts: Vec<&str> = key.split('.').map(str::trim).collect();
    let last = parts.pop().expect("split yields one part");
    let mut t = table;
    for part in parts {
        t = t
            .entry(part)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .ok_or_else(|| {
                Error::InvalidConfig(format!("--grid {key}: `{part}` is not a table"))
            })?;
    }
    t.insert(last.to_owned(), value);
    Ok(())
}
