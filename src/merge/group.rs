//! Grouping over several shards: each shard returns partial rows (its own groups and
//! aggregates); the merge combines partial rows of the same group — COUNT and SUM summed,
//! MIN and MAX compared as the server compares them, AVG as the combined SUM over the
//! combined COUNT — then computes expressions, applies HAVING, and orders the groups.

use std::collections::HashMap;

use super::decimal::Decimal;
use super::expr::Scope;
use super::keys::{Key, MergeError, Row};
use super::spec::{AggFn, Col, Grouping, KeyCols, Output, SortKey};
use super::value::{Value, ValueError, encode};
use crate::protocol::row::{ColumnMeta, Protocol};

/// A combined aggregate.
#[derive(Debug, Clone)]
enum Acc {
    Count(i128),
    Sum(Option<Value>),
    /// MIN or MAX: the winning partial value's raw bytes and key.
    Pick(Option<(Vec<u8>, Key)>),
}

#[derive(Debug, Clone)]
struct Group {
    keys: Vec<Key>,
    /// The first partial row that came from rows (else the first at all), every column.
    first: Vec<Option<Vec<u8>>>,
    first_has_rows: bool,
    aggs: Vec<Acc>,
}

/// A merged group row: the visible columns' values as the client receives them, and each
/// column's key for ordering.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Raw values of the visible columns.
    pub raws: Vec<Option<Vec<u8>>>,
    /// Keys of every output (visible, then those ORDER BY needs).
    pub keys: Vec<Key>,
    group_keys: Vec<Key>,
}

/// Partial rows of every shard, combined by group.
pub struct Groups<'s> {
    spec: &'s Grouping,
    metas: &'s [ColumnMeta],
    protocol: Protocol,
    hidden: usize,
    cap: u64,
    index: HashMap<Vec<u8>, usize>,
    groups: Vec<Group>,
}

impl<'s> Groups<'s> {
    /// An empty grouping for shard rows described by `metas` (hidden columns at the end).
    pub fn new(
        spec: &'s Grouping,
        metas: &'s [ColumnMeta],
        protocol: Protocol,
        hidden: usize,
        cap: u64,
    ) -> Self {
        Self {
            spec,
            metas,
            protocol,
            hidden,
            cap,
            index: HashMap::new(),
            groups: Vec::new(),
        }
    }

    /// Adds one partial row.
    pub fn add(&mut self, packet: &[u8]) -> Result<(), MergeError> {
        let row = Row::split(packet, self.metas, self.protocol, self.hidden)?;
        let keys: Vec<Key> = self
            .spec
            .keys
            .iter()
            .map(|k| row.key(k))
            .collect::<Result<_, _>>()?;
        let mut canonical = Vec::new();
        for k in &keys {
            k.canonical(&mut canonical);
        }
        let rows = match row.value(self.spec.rows)? {
            Value::Int(n) => n,
            _ => 0,
        };
        let n = match self.index.get(&canonical) {
            Some(&n) => n,
            None => {
                if self.groups.len() as u64 >= self.cap {
                    return Err(MergeError {
                        message: format!(
                            "more than sharding.merge_row_cap = {} groups to combine in memory",
                            self.cap
                        ),
                        over_cap: true,
                    });
                }
                self.groups.push(Group {
                    keys,
                    first: row.values.iter().map(|v| v.map(<[u8]>::to_vec)).collect(),
                    first_has_rows: rows > 0,
                    aggs: self
                        .spec
                        .aggregates
                        .iter()
                        .map(|a| match a.func {
                            AggFn::Count => Acc::Count(0),
                            AggFn::Sum => Acc::Sum(None),
                            AggFn::Min | AggFn::Max => Acc::Pick(None),
                        })
                        .collect(),
                });
                self.index.insert(canonical, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        let group = &mut self.groups[n];
        if !group.first_has_rows && rows > 0 {
            group.first = row.values.iter().map(|v| v.map(<[u8]>::to_vec)).collect();
            group.first_has_rows = true;
        }
        for (acc, agg) in group.aggs.iter_mut().zip(&self.spec.aggregates) {
            combine(acc, agg.func, &row, agg.column, agg.text)?;
        }
        Ok(())
    }

    /// The merged rows: outputs computed, HAVING applied, in ORDER BY order (group key
    /// order without ORDER BY). An aggregate without GROUP BY over no partial row at all
    /// still gives its one row, as MySQL does.
    pub fn finish(mut self, order: &[SortKey]) -> Result<Vec<Merged>, MergeError> {
        if self.groups.is_empty() && self.spec.keys.is_empty() {
            return Err(MergeError::new(
                "an aggregate over several shards got no partial row".to_owned(),
            ));
        }
        let visible = self.metas.len() - self.hidden;
        let mut out = Vec::with_capacity(self.groups.len());
        for group in std::mem::take(&mut self.groups) {
            let merged = self.merged(&group, visible)?;
            if let Some(having) = &self.spec.having {
                let scope = GroupScope {
                    groups: &self,
                    group: &group,
                    visible,
                };
                let keep = having.eval(&scope).map_err(MergeError::new)?;
                if super::expr::truth(&keep).map_err(MergeError::new)? != Some(true) {
                    continue;
                }
            }
            out.push(merged);
        }
        out.sort_by(|a, b| {
            if order.is_empty() {
                return a
                    .group_keys
                    .iter()
                    .zip(&b.group_keys)
                    .map(|(x, y)| x.compare(y))
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal);
            }
            for key in order {
                let Col::Visible(i) = key.key.value else {
                    continue;
                };
                let o = a.keys[i].compare(&b.keys[i]);
                let o = if key.descending { o.reverse() } else { o };
                if o.is_ne() {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        });
        Ok(out)
    }

    fn first_row<'g>(&'g self, group: &'g Group) -> Row<'g> {
        Row {
            values: group.first.iter().map(|v| v.as_deref()).collect(),
            metas: self.metas,
            protocol: self.protocol,
            hidden: self.hidden,
        }
    }

    fn merged(&self, group: &Group, visible: usize) -> Result<Merged, MergeError> {
        let scope = GroupScope {
            groups: self,
            group,
            visible,
        };
        let mut raws = Vec::with_capacity(visible);
        let mut keys = Vec::with_capacity(self.spec.outputs.len());
        for (i, output) in self.spec.outputs.iter().enumerate() {
            let (raw, key) = self.output(output, group, (i < visible).then_some(i), &scope)?;
            if i < visible {
                raws.push(raw);
            }
            keys.push(key);
        }
        Ok(Merged {
            raws,
            keys,
            group_keys: group.keys.clone(),
        })
    }

    /// One output's raw value (for the visible column at `position`) and its key.
    fn output(
        &self,
        output: &Output,
        group: &Group,
        position: Option<usize>,
        scope: &GroupScope<'_, '_>,
    ) -> Result<(Option<Vec<u8>>, Key), MergeError> {
        let meta = position.map(|i| &self.metas[i]);
        let first = self.first_row(group);
        let from_row = |kc: &KeyCols| -> Result<(Option<Vec<u8>>, Key), MergeError> {
            Ok((first.raw(kc.value).map(<[u8]>::to_vec), first.key(kc)?))
        };
        match output {
            Output::Key(k) => {
                let kc = self.spec.keys[*k];
                let (raw, key) = from_row(&kc)?;
                // A visible column is the grouped expression itself: the shard's value of it.
                let raw = match position {
                    Some(i) => group.first.get(i).cloned().flatten(),
                    None => raw,
                };
                Ok((raw, key))
            }
            Output::First(kc) => from_row(kc),
            Output::Aggregate(a) => match &group.aggs[*a] {
                Acc::Pick(picked) => Ok(match picked {
                    Some((raw, key)) => (Some(raw.clone()), key.clone()),
                    None => (None, Key::Null),
                }),
                acc => {
                    let value = acc_value(acc);
                    Ok((encoded(&value, meta, self.protocol)?, key_of(value)))
                }
            },
            Output::Average { sum, count } => {
                let value = average(&group.aggs[*sum], &group.aggs[*count], meta)?;
                Ok((encoded(&value, meta, self.protocol)?, key_of(value)))
            }
            Output::Expr(e) => {
                let value = e.eval(scope).map_err(MergeError::new)?;
                Ok((encoded(&value, meta, self.protocol)?, key_of(value)))
            }
        }
    }
}

/// Combines one partial value into an aggregate.
fn combine(
    acc: &mut Acc,
    func: AggFn,
    row: &Row<'_>,
    column: Col,
    text: Option<super::spec::TextCols>,
) -> Result<(), MergeError> {
    match acc {
        Acc::Count(n) => {
            if let Value::Int(v) = row.value(column)? {
                *n += v;
            }
        }
        Acc::Sum(total) => match row.value(column)? {
            Value::Null => {}
            v @ (Value::Int(_) | Value::Decimal(_)) => {
                *total = Some(match total.take() {
                    None => v,
                    Some(t) => add(&t, &v)?,
                });
            }
            _ => {
                return Err(MergeError::new(
                    "SUM or AVG of floating-point or non-numeric values over several shards (the combined result would not be exact)".to_owned(),
                ));
            }
        },
        Acc::Pick(best) => {
            let key = row.key(&KeyCols {
                value: column,
                text,
            })?;
            if key == Key::Null {
                return Ok(());
            }
            let better = match best {
                None => true,
                Some((_, current)) => {
                    let o = key.compare(current);
                    if func == AggFn::Min {
                        o.is_lt()
                    } else {
                        o.is_gt()
                    }
                }
            };
            if better {
                *best = Some((row.raw(column).unwrap_or_default().to_vec(), key));
            }
        }
    }
    Ok(())
}

fn add(a: &Value, b: &Value) -> Result<Value, MergeError> {
    let overflow = || MergeError::new("a SUM beyond the merge's 38-digit arithmetic".to_owned());
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => Value::Int(x.checked_add(*y).ok_or_else(overflow)?),
        _ => {
            let x = as_decimal(a).ok_or_else(overflow)?;
            let y = as_decimal(b).ok_or_else(overflow)?;
            Value::Decimal(x.checked_add(&y).ok_or_else(overflow)?)
        }
    })
}

fn as_decimal(v: &Value) -> Option<Decimal> {
    match v {
        Value::Int(i) => Some(Decimal::from_i128(*i)),
        Value::Decimal(d) => Some(*d),
        _ => None,
    }
}

fn acc_value(acc: &Acc) -> Value {
    match acc {
        Acc::Count(n) => Value::Int(*n),
        Acc::Sum(total) => total.clone().unwrap_or(Value::Null),
        Acc::Pick(_) => Value::Null,
    }
}

/// `AVG`: the combined SUM over the combined COUNT, at the scale the shards describe the
/// AVG column with. MariaDB computes the quotient in whole 9-digit blocks and cuts it
/// before rounding half away from zero: at a scale that is a multiple of 9 (0 included)
/// the quotient is truncated.
fn average(sum: &Acc, count: &Acc, meta: Option<&ColumnMeta>) -> Result<Value, MergeError> {
    let (Acc::Sum(total), Acc::Count(n)) = (sum, count) else {
        return Err(MergeError::new(
            "an AVG without its SUM and COUNT".to_owned(),
        ));
    };
    let (Some(total), n) = (total, *n) else {
        return Ok(Value::Null);
    };
    if n == 0 {
        return Ok(Value::Null);
    }
    let total =
        as_decimal(total).ok_or_else(|| MergeError::new("AVG of a non-number".to_owned()))?;
    let scale = match meta {
        Some(m) if matches!(m.column_type, 4 | 5) => {
            return Err(MergeError::new(
                "AVG of floating-point values over several shards (the combined result would not be exact)".to_owned(),
            ));
        }
        Some(m) => m.decimals,
        None => total.scale().saturating_add(4).min(38),
    };
    let overflow = || MergeError::new("an AVG beyond the merge's 38-digit arithmetic".to_owned());
    let q = if scale % 9 == 0 {
        truncated_quotient(&total, n, scale).ok_or_else(overflow)?
    } else {
        total
            .div_round(&Decimal::from_i128(n), scale)
            .ok_or_else(overflow)?
    };
    Ok(Value::Decimal(q))
}

/// `sum / count` at `scale` digits, truncated toward zero.
fn truncated_quotient(sum: &Decimal, count: i128, scale: u8) -> Option<Decimal> {
    let (m, s) = (sum.mantissa(), sum.scale());
    let q = if scale >= s {
        m.checked_mul(10i128.checked_pow(u32::from(scale - s))?)? / count
    } else {
        m / count.checked_mul(10i128.checked_pow(u32::from(s - scale))?)?
    };
    Decimal::new(q, scale)
}

fn key_of(value: Value) -> Key {
    match value {
        Value::Null => Key::Null,
        v => Key::Value(v),
    }
}

/// A computed value as a visible column's raw value.
fn encoded(
    value: &Value,
    meta: Option<&ColumnMeta>,
    protocol: Protocol,
) -> Result<Option<Vec<u8>>, MergeError> {
    match (value, meta) {
        (Value::Null, _) | (_, None) => Ok(None),
        (v, Some(m)) => Ok(Some(encode(v, m, protocol).map_err(|e| {
            MergeError::new(match (e, v) {
                (ValueError::Unsupported(_), Value::Double(_)) => {
                    "a floating-point result of an expression over aggregates that MariaDB would print with an exponent or fixed decimals (the merge writes doubles from 1e-10 to 1e15 in the text protocol; select the aggregate itself)".to_owned()
                }
                (e, _) => format!("a merged value that does not fit its column ({e})"),
            })
        })?)),
    }
}

/// What expressions over a group read.
struct GroupScope<'g, 's> {
    groups: &'g Groups<'s>,
    group: &'g Group,
    visible: usize,
}

impl Scope for GroupScope<'_, '_> {
    fn aggregate(&self, i: usize) -> Result<Value, String> {
        match &self.group.aggs[i] {
            Acc::Pick(Some((raw, _))) => {
                let agg = &self.groups.spec.aggregates[i];
                let row = self.groups.first_row(self.group);
                let meta = &self.groups.metas[row.index(agg.column)];
                super::value::decode(raw, meta, self.groups.protocol).map_err(|e| e.to_string())
            }
            acc => Ok(acc_value(acc)),
        }
    }

    fn key(&self, i: usize) -> Result<Value, String> {
        let kc = self.groups.spec.keys[i];
        self.groups
            .first_row(self.group)
            .value(kc.value)
            .map_err(|e| e.message)
    }

    fn output(&self, i: usize) -> Result<Value, String> {
        let output = self
            .groups
            .spec
            .outputs
            .get(i)
            .ok_or_else(|| format!("no output {i}"))?;
        if matches!(output, Output::Expr(_)) {
            return Err("an expression that refers to another computed column".to_owned());
        }
        let position = (i < self.visible).then_some(i);
        let meta = position.map(|i| &self.groups.metas[i]);
        let (raw, key) = self
            .groups
            .output(output, self.group, position, self)
            .map_err(|e| e.message)?;
        match (raw, meta, key) {
            (Some(raw), Some(meta), _) => {
                super::value::decode(&raw, meta, self.groups.protocol).map_err(|e| e.to_string())
            }
            (_, _, Key::Value(v)) => Ok(v),
            (_, _, Key::Null) => Ok(Value::Null),
            (_, _, Key::Text { .. }) => Err("a text value after the merge".to_owned()),
        }
    }
}
