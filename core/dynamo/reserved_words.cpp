// DynamoDB's reserved words (developer guide, "Reserved words in DynamoDB").
// This is a subset of the documented list (about 570 words): the words most
// likely to appear as attribute names. A name missing here is accepted by us
// and rejected by DynamoDB, so extend the list when a difference shows up.

#include <algorithm>
#include <array>
#include <string>

#include "core/dynamo/expression.hpp"

namespace leaseproof::dynamo {

namespace {

// Sorted, upper case (the list is case-insensitive).
constexpr std::array<std::string_view, 151> reserved_words = {
    "ABORT", "ABSOLUTE", "ACTION", "ADD", "AFTER", "AGENT", "ALL", "ALTER", "AND", "ANY", "ARCHIVE", "ARRAY", "AS",
    "ASC", "AT", "ATTRIBUTE", "AUTH", "BACKUP", "BATCH", "BEFORE", "BEGIN", "BETWEEN", "BINARY", "BIT", "BLOB",
    "BOOLEAN", "BY", "BYTE", "CALL", "CAPACITY", "CASE", "CAST", "CHAR", "CHECK", "CLASS", "CLOSE", "COLUMN",
    "COMMENT", "COMMIT", "CONDITION", "CONNECT", "CONNECTION", "CONSISTENT", "COUNT", "COUNTER", "CREATE",
    "CURRENT", "CURSOR", "CYCLE", "DATA", "DATABASE", "DATE", "DATETIME", "DAY", "DECIMAL", "DEFAULT", "DELETE",
    "DESC", "DOMAIN", "DOUBLE", "DROP", "DURATION", "DYNAMIC", "EACH", "ELEMENT", "ELSE", "EMPTY", "END", "ERROR",
    "EXISTS", "FALSE", "FILE", "FILTER", "FIRST", "FLOAT", "FOR", "FORMAT", "FROM", "GROUP", "HASH", "HOUR", "IF",
    "IN", "INDEX", "INTEGER", "INTERVAL", "INTO", "IS", "ITEM", "ITEMS", "JOIN", "KEY", "KEYS", "LAST", "LEVEL",
    "LIMIT", "LIST", "LOCAL", "LOCK", "MAP", "MAX", "MEMBER", "MIN", "MINUTE", "MODE", "MONTH", "NAME", "NEXT",
    "NO", "NOT", "NULL", "NUMBER", "OF", "OFFSET", "ON", "OPEN", "OR", "ORDER", "OWNER", "PARTITION", "PATH",
    "PERCENT", "PRIMARY", "RANGE", "READ", "REMOVE", "RETURN", "ROLE", "SECOND", "SELECT", "SESSION", "SET", "SIZE",
    "SOURCE", "START", "STATE", "STATUS", "STRING", "TABLE", "TIME", "TIMESTAMP", "TO", "TOKEN", "TTL", "TYPE",
    "USER", "VALUE", "VALUES", "VIEW", "WHERE", "YEAR",
};

}  // namespace

bool is_reserved_word(std::string_view word) {
  // Longer than any reserved word: cannot match, and keeps the copy small.
  constexpr std::size_t reserved_word_bytes_max = 16;
  if (word.empty() || word.size() > reserved_word_bytes_max) return false;
  std::string upper(word);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; });
  return std::binary_search(reserved_words.begin(), reserved_words.end(), std::string_view(upper));
}

}  // namespace leaseproof::dynamo
