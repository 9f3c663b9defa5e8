use super::*;
use testkit::volume;

#[test]
fn tables_align_columns() {
    let table = render_table(&[volume("pv-a", "1Gi").phase("Available").build()], &[]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAME   CAPACITY   RECLAIM POLICY   STATUS"));
    assert!(lines[1].starts_with("pv-a   1Gi"), "{table}");
    assert!(lines[1].contains("Available"));
    assert!(lines[3].starts_with("NAMESPACE   NAME   STATUS   VOLUME"));
}
