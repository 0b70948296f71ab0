#define BOOST_TEST_MODULE blas
#include <boost/test/unit_test.hpp>
