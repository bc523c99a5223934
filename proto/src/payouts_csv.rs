//! A payout's items as a CSV file, as the command line and the dashboard take it: a header
//! row naming the columns `to`, `asset`, `amount` and, optionally, `token` and `reference`
//! (any order, any case), then one row per item. `asset` is `native`, `erc20` or `spl`;
//! `amount` is in base units. The file's shape is checked here; the items themselves are
//! checked by the core, which names a bad one `items[i].field` (row `i + 2` of the file).

use crate::v1 as pb;

/// What is wrong with a file: the row (1 is the header) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvError {
    /// The row, from 1 (the header).
    pub row: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for CsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "row {}: {}", self.row, self.message)
    }
}

/// The file row item `index` was read from.
pub fn row_of(index: usize) -> usize {
    index + 2
}

/// The file row of the item a field such as `items[3].to` names (5), and the field within
/// the item (`to`); `None` for a field of the payout itself (`from`).
pub fn row_of_field(field: &str) -> Option<(usize, &str)> {
    let (index, name) = field.strip_prefix("items[")?.split_once("].")?;
    Some((row_of(index.parse().ok()?), name))
}

/// The items of the CSV `text`, or every row's shape problem.
pub fn parse(text: &str) -> Result<Vec<pb::PayoutItemRequest>, Vec<CsvError>> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(true)
        .comment(Some(b'#'))
        .from_reader(text.trim_start_matches('\u{feff}').as_bytes());
    let header_error = |message: String| vec![CsvError { row: 1, message }];
    let headers = reader
        .headers()
        .map_err(|e| header_error(e.to_string()))?
        .clone();
    let column = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
    let (Some(to), Some(asset), Some(amount)) = (column("to"), column("asset"), column("amount"))
    else {
        return Err(header_error(format!(
            "the header must name the columns to, asset and amount (and may name token and reference), got {:?}",
            headers.iter().collect::<Vec<_>>().join(",")
        )));
    };
    let (token, reference) = (column("token"), column("reference"));
    let mut items = Vec::new();
    let mut errors = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let row = row_of(i);
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                errors.push(CsvError {
                    row,
                    message: e.to_string(),
                });
                continue;
            }
        };
        let field = |at: Option<usize>| {
            at.and_then(|at| record.get(at))
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let asset_name = field(Some(asset)).unwrap_or_default();
        let asset = match asset_name.to_ascii_lowercase().as_str() {
            "native" => pb::Asset::Native,
            "erc20" => pb::Asset::Erc20,
            "spl" => pb::Asset::Spl,
            _ => {
                errors.push(CsvError {
                    row,
                    message: format!("asset must be native, erc20 or spl, got {asset_name:?}"),
                });
                pb::Asset::Unspecified
            }
        };
        items.push(pb::PayoutItemRequest {
            to: field(Some(to)).unwrap_or_default(),
            asset: asset.into(),
            token: field(token),
            amount: field(Some(amount)).unwrap_or_default(),
            reference: field(reference),
        });
    }
    if items.is_empty() && errors.is_empty() {
        errors.push(CsvError {
            row: 2,
            message: "the file holds no items".to_owned(),
        });
    }
    if errors.is_empty() {
        Ok(items)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_read_by_their_columns_names() {
        let text = "\u{feff}Amount,to,asset,reference\n1000, 0xab ,native,invoice 1\n# a comment\n5,mint,SPL,\n";
        let items = parse(text).expect("items");
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].to, "0xab");
        assert_eq!(items[0].amount, "1000");
        assert_eq!(items[0].reference.as_deref(), Some("invoice 1"));
        assert_eq!(items[1].asset(), pb::Asset::Spl);
        assert_eq!(items[1].reference, None);
    }

    #[test]
    fn a_bad_file_names_its_rows() {
        let errors = parse("to,amount\n0xab,1\n").expect_err("no asset column");
        assert_eq!(errors[0].row, 1);
        let errors = parse("to,asset,amount\n0xab,native,1\n0xcd,gold,2\n").expect_err("bad asset");
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].row, 3);
        assert!(errors[0].message.contains("gold"));
        assert_eq!(parse("to,asset,amount\n").expect_err("empty")[0].row, 2);
        assert_eq!(row_of_field("items[3].to"), Some((5, "to")));
        assert_eq!(row_of_field("from"), None);
    }
}
