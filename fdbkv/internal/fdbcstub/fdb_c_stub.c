/*
 * fdbkv/internal/fdbcstub/fdb_c_stub.c
 *
 * A stand-in for libfdb_c that lets the FoundationDB Go binding, and fdbkv
 * on top of it, compile and link where FoundationDB is not installed. It is
 * NOT FoundationDB: nothing here talks to a cluster. Every function that can
 * report an error reports FDBCSTUB_ERROR (4100, internal_error), every
 * future it hands out is already ready and failed with that error, and
 * everything else does nothing. No call blocks and none crashes.
 *
 * One opt-in exception: with FDBCSTUB_SELECT_API_VERSION=1 in the
 * environment, fdb_select_api_version_impl succeeds (as a real libfdb_c does
 * without a cluster), so a test binary can select an API version and run
 * the binding's pure-Go code that needs one, such as
 * tuple.PackWithVersionstamp (fdbkv/internal/tuplediff). Everything else
 * still fails.
 */
#define FDB_API_VERSION 730
#include <foundationdb/fdb_c.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define FDBCSTUB_ERROR 4100

static const char fdbcstub_message[] =
    "libfdb_c stub from fdbkv/internal/fdbcstub: compile/link only, not FoundationDB";

/* Every future is this one static object: ready, failed, never freed. */
struct FDBFuture {
    fdb_error_t error;
};
static FDBFuture fdbcstub_future = {FDBCSTUB_ERROR};

static FDBFuture* failed_future(void) {
    return &fdbcstub_future;
}

/* API version selection and errors. */
fdb_error_t fdb_select_api_version_impl(int runtime_version, int header_version) {
    (void)runtime_version;
    (void)header_version;
    const char* accept = getenv("FDBCSTUB_SELECT_API_VERSION");
    if (accept != NULL && strcmp(accept, "1") == 0) {
        return 0;
    }
    return FDBCSTUB_ERROR;
}

int fdb_get_max_api_version(void) {
    return 0; /* supports no API version at all */
}

const char* fdb_get_error(fdb_error_t code) {
    (void)code;
    return fdbcstub_message;
}

/* Network. */
fdb_error_t fdb_network_set_option(FDBNetworkOption option, const uint8_t* value, int value_length) {
    (void)option;
    (void)value;
    (void)value_length;
    return FDBCSTUB_ERROR;
}

fdb_error_t fdb_setup_network(void) {
    return FDBCSTUB_ERROR;
}

fdb_error_t fdb_run_network(void) {
    return FDBCSTUB_ERROR;
}

fdb_error_t fdb_stop_network(void) {
    return FDBCSTUB_ERROR;
}

/* Futures. */
void fdb_future_cancel(FDBFuture* f) {
    (void)f;
}

void fdb_future_release_memory(FDBFuture* f) {
    (void)f;
}

void fdb_future_destroy(FDBFuture* f) {
    (void)f;
}

fdb_bool_t fdb_future_is_ready(FDBFuture* f) {
    (void)f;
    return 1;
}

fdb_error_t fdb_future_set_callback(FDBFuture* f, FDBCallback callback, void* callback_parameter) {
    /* The future is already ready: like the real library, call back now. */
    if (callback != NULL) {
        callback(f, callback_parameter);
    }
    return 0;
}

fdb_error_t fdb_future_get_error(FDBFuture* f) {
    return f != NULL ? f->error : FDBCSTUB_ERROR;
}

fdb_error_t fdb_future_get_int64(FDBFuture* f, int64_t* out) {
    if (out != NULL) {
        *out = 0;
    }
    return fdb_future_get_error(f);
}

fdb_error_t fdb_future_get_key(FDBFuture* f, const uint8_t** out_key, int* out_key_length) {
    if (out_key != NULL) {
        *out_key = NULL;
    }
    if (out_key_length != NULL) {
        *out_key_length = 0;
    }
    return fdb_future_get_error(f);
}

fdb_error_t fdb_future_get_value(FDBFuture* f, fdb_bool_t* out_present, const uint8_t** out_value,
                                 int* out_value_length) {
    if (out_present != NULL) {
        *out_present = 0;
    }
    if (out_value != NULL) {
        *out_value = NULL;
    }
    if (out_value_length != NULL) {
        *out_value_length = 0;
    }
    return fdb_future_get_error(f);
}

fdb_error_t fdb_future_get_keyvalue_array(FDBFuture* f, const FDBKeyValue** out_kv, int* out_count,
                                          fdb_bool_t* out_more) {
    if (out_kv != NULL) {
        *out_kv = NULL;
    }
    if (out_count != NULL) {
        *out_count = 0;
    }
    if (out_more != NULL) {
        *out_more = 0;
    }
    return fdb_future_get_error(f);
}

fdb_error_t fdb_future_get_key_array(FDBFuture* f, const FDBKey** out_key_array, int* out_count) {
    if (out_key_array != NULL) {
        *out_key_array = NULL;
    }
    if (out_count != NULL) {
        *out_count = 0;
    }
    return fdb_future_get_error(f);
}

fdb_error_t fdb_future_get_string_array(FDBFuture* f, const char*** out_strings, int* out_count) {
    if (out_strings != NULL) {
        *out_strings = NULL;
    }
    if (out_count != NULL) {
        *out_count = 0;
    }
    return fdb_future_get_error(f);
}

/* Databases and tenants. */
fdb_error_t fdb_create_database(const char* cluster_file_path, FDBDatabase** out_database) {
    (void)cluster_file_path;
    if (out_database != NULL) {
        *out_database = NULL;
    }
    return FDBCSTUB_ERROR;
}

fdb_error_t fdb_create_database_from_connection_string(const char* connection_string,
                                                       FDBDatabase** out_database) {
    (void)connection_string;
    if (out_database != NULL) {
        *out_database = NULL;
    }
    return FDBCSTUB_ERROR;
}

void fdb_database_destroy(FDBDatabase* d) {
    (void)d;
}

fdb_error_t fdb_database_set_option(FDBDatabase* d, FDBDatabaseOption option, const uint8_t* value,
                                    int value_length) {
    (void)d;
    (void)option;
    (void)value;
    (void)value_length;
    return FDBCSTUB_ERROR;
}

fdb_error_t fdb_database_open_tenant(FDBDatabase* d, const uint8_t* tenant_name, int tenant_name_length,
                                     FDBTenant** out_tenant) {
    (void)d;
    (void)tenant_name;
    (void)tenant_name_length;
    if (out_tenant != NULL) {
        *out_tenant = NULL;
    }
    return FDBCSTUB_ERROR;
}

fdb_error_t fdb_database_create_transaction(FDBDatabase* d, FDBTransaction** out_transaction) {
    (void)d;
    if (out_transaction != NULL) {
        *out_transaction = NULL;
    }
    return FDBCSTUB_ERROR;
}

FDBFuture* fdb_database_reboot_worker(FDBDatabase* d, const uint8_t* address, int address_length,
                                      fdb_bool_t check, int duration) {
    (void)d;
    (void)address;
    (void)address_length;
    (void)check;
    (void)duration;
    return failed_future();
}

FDBFuture* fdb_database_get_client_status(FDBDatabase* d) {
    (void)d;
    return failed_future();
}

fdb_error_t fdb_tenant_create_transaction(FDBTenant* t, FDBTransaction** out_transaction) {
    (void)t;
    if (out_transaction != NULL) {
        *out_transaction = NULL;
    }
    return FDBCSTUB_ERROR;
}

void fdb_tenant_destroy(FDBTenant* t) {
    (void)t;
}

/* Transactions. */
void fdb_transaction_destroy(FDBTransaction* tr) {
    (void)tr;
}

void fdb_transaction_cancel(FDBTransaction* tr) {
    (void)tr;
}

void fdb_transaction_reset(FDBTransaction* tr) {
    (void)tr;
}

fdb_error_t fdb_transaction_set_option(FDBTransaction* tr, FDBTransactionOption option, const uint8_t* value,
                                       int value_length) {
    (void)tr;
    (void)option;
    (void)value;
    (void)value_length;
    return FDBCSTUB_ERROR;
}

void fdb_transaction_set_read_version(FDBTransaction* tr, int64_t version) {
    (void)tr;
    (void)version;
}

FDBFuture* fdb_transaction_get_read_version(FDBTransaction* tr) {
    (void)tr;
    return failed_future();
}

FDBFuture* fdb_transaction_get(FDBTransaction* tr, const uint8_t* key_name, int key_name_length,
                               fdb_bool_t snapshot) {
    (void)tr;
    (void)key_name;
    (void)key_name_length;
    (void)snapshot;
    return failed_future();
}

FDBFuture* fdb_transaction_get_key(FDBTransaction* tr, const uint8_t* key_name, int key_name_length,
                                   fdb_bool_t or_equal, int offset, fdb_bool_t snapshot) {
    (void)tr;
    (void)key_name;
    (void)key_name_length;
    (void)or_equal;
    (void)offset;
    (void)snapshot;
    return failed_future();
}

FDBFuture* fdb_transaction_get_addresses_for_key(FDBTransaction* tr, const uint8_t* key_name,
                                                 int key_name_length) {
    (void)tr;
    (void)key_name;
    (void)key_name_length;
    return failed_future();
}

FDBFuture* fdb_transaction_get_range(FDBTransaction* tr, const uint8_t* begin_key_name,
                                     int begin_key_name_length, fdb_bool_t begin_or_equal, int begin_offset,
                                     const uint8_t* end_key_name, int end_key_name_length,
                                     fdb_bool_t end_or_equal, int end_offset, int limit, int target_bytes,
                                     FDBStreamingMode mode, int iteration, fdb_bool_t snapshot,
                                     fdb_bool_t reverse) {
    (void)tr;
    (void)begin_key_name;
    (void)begin_key_name_length;
    (void)begin_or_equal;
    (void)begin_offset;
    (void)end_key_name;
    (void)end_key_name_length;
    (void)end_or_equal;
    (void)end_offset;
    (void)limit;
    (void)target_bytes;
    (void)mode;
    (void)iteration;
    (void)snapshot;
    (void)reverse;
    return failed_future();
}

FDBFuture* fdb_transaction_get_estimated_range_size_bytes(FDBTransaction* tr, const uint8_t* begin_key_name,
                                                          int begin_key_name_length,
                                                          const uint8_t* end_key_name,
                                                          int end_key_name_length) {
    (void)tr;
    (void)begin_key_name;
    (void)begin_key_name_length;
    (void)end_key_name;
    (void)end_key_name_length;
    return failed_future();
}

FDBFuture* fdb_transaction_get_range_split_points(FDBTransaction* tr, const uint8_t* begin_key_name,
                                                  int begin_key_name_length, const uint8_t* end_key_name,
                                                  int end_key_name_length, int64_t chunk_size) {
    (void)tr;
    (void)begin_key_name;
    (void)begin_key_name_length;
    (void)end_key_name;
    (void)end_key_name_length;
    (void)chunk_size;
    return failed_future();
}

void fdb_transaction_set(FDBTransaction* tr, const uint8_t* key_name, int key_name_length,
                         const uint8_t* value, int value_length) {
    (void)tr;
    (void)key_name;
    (void)key_name_length;
    (void)value;
    (void)value_length;
}

void fdb_transaction_atomic_op(FDBTransaction* tr, const uint8_t* key_name, int key_name_length,
                               const uint8_t* param, int param_length, FDBMutationType operation_type) {
    (void)tr;
    (void)key_name;
    (void)key_name_length;
    (void)param;
    (void)param_length;
    (void)operation_type;
}

void fdb_transaction_clear(FDBTransaction* tr, const uint8_t* key_name, int key_name_length) {
    (void)tr;
    (void)key_name;
    (void)key_name_length;
}

void fdb_transaction_clear_range(FDBTransaction* tr, const uint8_t* begin_key_name, int begin_key_name_length,
                                 const uint8_t* end_key_name, int end_key_name_length) {
    (void)tr;
    (void)begin_key_name;
    (void)begin_key_name_length;
    (void)end_key_name;
    (void)end_key_name_length;
}

FDBFuture* fdb_transaction_watch(FDBTransaction* tr, const uint8_t* key_name, int key_name_length) {
    (void)tr;
    (void)key_name;
    (void)key_name_length;
    return failed_future();
}

FDBFuture* fdb_transaction_commit(FDBTransaction* tr) {
    (void)tr;
    return failed_future();
}

fdb_error_t fdb_transaction_get_committed_version(FDBTransaction* tr, int64_t* out_version) {
    (void)tr;
    if (out_version != NULL) {
        *out_version = 0;
    }
    return FDBCSTUB_ERROR;
}

FDBFuture* fdb_transaction_get_approximate_size(FDBTransaction* tr) {
    (void)tr;
    return failed_future();
}

FDBFuture* fdb_transaction_get_versionstamp(FDBTransaction* tr) {
    (void)tr;
    return failed_future();
}

FDBFuture* fdb_transaction_on_error(FDBTransaction* tr, fdb_error_t error) {
    (void)tr;
    (void)error;
    return failed_future();
}

fdb_error_t fdb_transaction_add_conflict_range(FDBTransaction* tr, const uint8_t* begin_key_name,
                                               int begin_key_name_length, const uint8_t* end_key_name,
                                               int end_key_name_length, FDBConflictRangeType type) {
    (void)tr;
    (void)begin_key_name;
    (void)begin_key_name_length;
    (void)end_key_name;
    (void)end_key_name_length;
    (void)type;
    return FDBCSTUB_ERROR;
}
