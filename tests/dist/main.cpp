#define BOOST_TEST_MODULE dist
#include <boost/test/unit_test.hpp>
