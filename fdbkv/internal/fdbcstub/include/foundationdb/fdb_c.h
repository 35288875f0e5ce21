/*
 * fdbkv/internal/fdbcstub/include/foundationdb/fdb_c.h
 *
 * A compile-only stand-in for FoundationDB's C client header, written for
 * fdbqueue. It declares exactly the types, constants and functions that the
 * official Go binding (github.com/apple/foundationdb/bindings/go/src/fdb)
 * uses through cgo, with the signatures of the public C API documentation,
 * so that the binding and fdbkv compile. It is NOT FoundationDB's header and
 * the matching library (fdb_c_stub.c) is NOT FoundationDB: every call fails.
 * See ../../README.md.
 */
#ifndef FDBQUEUE_FDBCSTUB_FDB_C_H
#define FDBQUEUE_FDBCSTUB_FDB_C_H

#include <stdint.h>

/* The highest API version this stand-in accepts at compile time; the
 * binding defines FDB_API_VERSION to 730 before including this header. */
#define FDBCSTUB_HEADER_API_VERSION 730

#ifndef FDB_API_VERSION
#error "define FDB_API_VERSION before including foundationdb/fdb_c.h"
#elif FDB_API_VERSION > FDBCSTUB_HEADER_API_VERSION
#error "this stub header declares API version 730 at most"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Scalars. */
typedef int fdb_error_t;
typedef int fdb_bool_t;

/* Opaque handles. */
typedef struct FDBFuture FDBFuture;
typedef struct FDBDatabase FDBDatabase;
typedef struct FDBTenant FDBTenant;
typedef struct FDBTransaction FDBTransaction;

/* Keys and key-value pairs as the C API lays them out: 4-byte packing, so
 * an FDBKey is 12 bytes and an FDBKeyValue 24 on 64-bit targets (the Go
 * binding walks arrays of them with those strides). */
#pragma pack(push, 4)
typedef struct {
    const uint8_t* key;
    int key_length;
} FDBKey;

typedef struct {
    const uint8_t* key;
    int key_length;
    const uint8_t* value;
    int value_length;
} FDBKeyValue;
#pragma pack(pop)

/* Option and mode enumerations. The binding passes numeric codes straight
 * through (it generates its own constants), so only the codes fdbkv relies
 * on are named here. */
typedef enum {
    FDBCSTUB_NET_OPTION_NONE = 0
} FDBNetworkOption;

typedef enum {
    FDBCSTUB_DB_OPTION_MAX_WATCHES = 20,
    FDBCSTUB_DB_OPTION_TRANSACTION_TIMEOUT = 500
} FDBDatabaseOption;

typedef enum {
    FDBCSTUB_TR_OPTION_TIMEOUT = 500,
    FDBCSTUB_TR_OPTION_RETRY_LIMIT = 501,
    FDBCSTUB_TR_OPTION_MAX_RETRY_DELAY = 502
} FDBTransactionOption;

typedef enum {
    FDBCSTUB_STREAMING_MODE_WANT_ALL = -2,
    FDBCSTUB_STREAMING_MODE_ITERATOR = -1,
    FDBCSTUB_STREAMING_MODE_EXACT = 0,
    FDBCSTUB_STREAMING_MODE_SMALL = 1,
    FDBCSTUB_STREAMING_MODE_MEDIUM = 2,
    FDBCSTUB_STREAMING_MODE_LARGE = 3,
    FDBCSTUB_STREAMING_MODE_SERIAL = 4
} FDBStreamingMode;

typedef enum {
    FDBCSTUB_MUTATION_ADD = 2,
    FDBCSTUB_MUTATION_BIT_AND = 6,
    FDBCSTUB_MUTATION_BIT_OR = 7,
    FDBCSTUB_MUTATION_BIT_XOR = 8,
    FDBCSTUB_MUTATION_APPEND_IF_FITS = 9,
    FDBCSTUB_MUTATION_MAX = 12,
    FDBCSTUB_MUTATION_MIN = 13,
    FDBCSTUB_MUTATION_SET_VERSIONSTAMPED_KEY = 14,
    FDBCSTUB_MUTATION_SET_VERSIONSTAMPED_VALUE = 15,
    FDBCSTUB_MUTATION_BYTE_MIN = 16,
    FDBCSTUB_MUTATION_BYTE_MAX = 17,
    FDBCSTUB_MUTATION_COMPARE_AND_CLEAR = 20
} FDBMutationType;

typedef enum {
    FDBCSTUB_CONFLICT_RANGE_READ = 0,
    FDBCSTUB_CONFLICT_RANGE_WRITE = 1
} FDBConflictRangeType;

typedef void (*FDBCallback)(FDBFuture* future, void* callback_parameter);

/* API version selection and errors. */
fdb_error_t fdb_select_api_version_impl(int runtime_version, int header_version);
#define fdb_select_api_version(v) fdb_select_api_version_impl((v), FDB_API_VERSION)
int fdb_get_max_api_version(void);
const char* fdb_get_error(fdb_error_t code);

/* Network. */
fdb_error_t fdb_network_set_option(FDBNetworkOption option, const uint8_t* value, int value_length);
fdb_error_t fdb_setup_network(void);
fdb_error_t fdb_run_network(void);
fdb_error_t fdb_stop_network(void);

/* Futures. */
void fdb_future_cancel(FDBFuture* f);
void fdb_future_release_memory(FDBFuture* f);
void fdb_future_destroy(FDBFuture* f);
fdb_bool_t fdb_future_is_ready(FDBFuture* f);
fdb_error_t fdb_future_set_callback(FDBFuture* f, FDBCallback callback, void* callback_parameter);
fdb_error_t fdb_future_get_error(FDBFuture* f);
fdb_error_t fdb_future_get_int64(FDBFuture* f, int64_t* out);
fdb_error_t fdb_future_get_key(FDBFuture* f, const uint8_t** out_key, int* out_key_length);
fdb_error_t fdb_future_get_value(FDBFuture* f, fdb_bool_t* out_present, const uint8_t** out_value,
                                 int* out_value_length);
fdb_error_t fdb_future_get_keyvalue_array(FDBFuture* f, const FDBKeyValue** out_kv, int* out_count,
                                          fdb_bool_t* out_more);
fdb_error_t fdb_future_get_key_array(FDBFuture* f, const FDBKey** out_key_array, int* out_count);
fdb_error_t fdb_future_get_string_array(FDBFuture* f, const char*** out_strings, int* out_count);

/* Databases and tenants. */
fdb_error_t fdb_create_database(const char* cluster_file_path, FDBDatabase** out_database);
fdb_error_t fdb_create_database_from_connection_string(const char* connection_string,
                                                       FDBDatabase** out_database);
void fdb_database_destroy(FDBDatabase* d);
fdb_error_t fdb_database_set_option(FDBDatabase* d, FDBDatabaseOption option, const uint8_t* value,
                                    int value_length);
fdb_error_t fdb_database_open_tenant(FDBDatabase* d, const uint8_t* tenant_name, int tenant_name_length,
                                     FDBTenant** out_tenant);
fdb_error_t fdb_database_create_transaction(FDBDatabase* d, FDBTransaction** out_transaction);
FDBFuture* fdb_database_reboot_worker(FDBDatabase* d, const uint8_t* address, int address_length,
                                      fdb_bool_t check, int duration);
FDBFuture* fdb_database_get_client_status(FDBDatabase* d);
fdb_error_t fdb_tenant_create_transaction(FDBTenant* t, FDBTransaction** out_transaction);
void fdb_tenant_destroy(FDBTenant* t);

/* Transactions. */
void fdb_transaction_destroy(FDBTransaction* tr);
void fdb_transaction_cancel(FDBTransaction* tr);
void fdb_transaction_reset(FDBTransaction* tr);
fdb_error_t fdb_transaction_set_option(FDBTransaction* tr, FDBTransactionOption option, const uint8_t* value,
                                       int value_length);
void fdb_transaction_set_read_version(FDBTransaction* tr, int64_t version);
FDBFuture* fdb_transaction_get_read_version(FDBTransaction* tr);
FDBFuture* fdb_transaction_get(FDBTransaction* tr, const uint8_t* key_name, int key_name_length,
                               fdb_bool_t snapshot);
FDBFuture* fdb_transaction_get_key(FDBTransaction* tr, const uint8_t* key_name, int key_name_length,
                                   fdb_bool_t or_equal, int offset, fdb_bool_t snapshot);
FDBFuture* fdb_transaction_get_addresses_for_key(FDBTransaction* tr, const uint8_t* key_name,
                                                 int key_name_length);
FDBFuture* fdb_transaction_get_range(FDBTransaction* tr, const uint8_t* begin_key_name,
                                     int begin_key_name_length, fdb_bool_t begin_or_equal, int begin_offset,
                                     const uint8_t* end_key_name, int end_key_name_length,
                                     fdb_bool_t end_or_equal, int end_offset, int limit, int target_bytes,
                                     FDBStreamingMode mode, int iteration, fdb_bool_t snapshot,
                                     fdb_bool_t reverse);
FDBFuture* fdb_transaction_get_estimated_range_size_bytes(FDBTransaction* tr, const uint8_t* begin_key_name,
                                                          int begin_key_name_length,
                                                          const uint8_t* end_key_name,
                                                          int end_key_name_length);
FDBFuture* fdb_transaction_get_range_split_points(FDBTransaction* tr, const uint8_t* begin_key_name,
                                                  int begin_key_name_length, const uint8_t* end_key_name,
                                                  int end_key_name_length, int64_t chunk_size);
void fdb_transaction_set(FDBTransaction* tr, const uint8_t* key_name, int key_name_length,
                         const uint8_t* value, int value_length);
void fdb_transaction_atomic_op(FDBTransaction* tr, const uint8_t* key_name, int key_name_length,
                               const uint8_t* param, int param_length, FDBMutationType operation_type);
void fdb_transaction_clear(FDBTransaction* tr, const uint8_t* key_name, int key_name_length);
void fdb_transaction_clear_range(FDBTransaction* tr, const uint8_t* begin_key_name, int begin_key_name_length,
                                 const uint8_t* end_key_name, int end_key_name_length);
FDBFuture* fdb_transaction_watch(FDBTransaction* tr, const uint8_t* key_name, int key_name_length);
FDBFuture* fdb_transaction_commit(FDBTransaction* tr);
fdb_error_t fdb_transaction_get_committed_version(FDBTransaction* tr, int64_t* out_version);
FDBFuture* fdb_transaction_get_approximate_size(FDBTransaction* tr);
FDBFuture* fdb_transaction_get_versionstamp(FDBTransaction* tr);
FDBFuture* fdb_transaction_on_error(FDBTransaction* tr, fdb_error_t error);
fdb_error_t fdb_transaction_add_conflict_range(FDBTransaction* tr, const uint8_t* begin_key_name,
                                               int begin_key_name_length, const uint8_t* end_key_name,
                                               int end_key_name_length, FDBConflictRangeType type);

#ifdef __cplusplus
}
#endif

#endif /* FDBQUEUE_FDBCSTUB_FDB_C_H */
